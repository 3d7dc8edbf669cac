"""Checks the "blas" record of an fsdp-run summary (the log's last line)
against this CPU's flags as the kernel reports them in /proc/cpuinfo (not
the runtime's own CPUID reading): the OpenBLAS core the GEMMs ran must be of
the CPU's instruction-set tier (AVX-512: SkylakeX, Cooperlake,
SapphireRapids; AVX2 + FMA: Haswell, Zen; AVX: Sandybridge ... Excavator:
OpenBLAS's kernel/x86_64/KERNEL.<core> files), the GEMM self-test within
1e-5, and no warning. --library-choice: FSDP_BLAS_CORE=openblas, the core
must be the one OpenBLAS loaded with.

Usage: check_blas.py [--library-choice] LOG
"""
import json
import re
import sys

TIERS = {"generic": 0, "avx": 1, "avx2": 2, "avx512": 3}
CORE_TIER = {"skylakex": 3, "cooperlake": 3, "sapphirerapids": 3,
             "haswell": 2, "zen": 2, "sandybridge": 1, "bulldozer": 1,
             "piledriver": 1, "steamroller": 1, "excavator": 1}


def cpu_tier():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    tier = "generic"
    if "avx" in flags:
        tier = "avx"
    if {"avx2", "fma"} <= flags:
        tier = "avx2"
        if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
            tier = "avx512"
    return tier


def main():
    args = sys.argv[1:]
    library_choice = "--library-choice" in args
    log = [a for a in args if not a.startswith("--")][0]
    summary = json.loads(open(log).read().splitlines()[-1])
    b = summary["blas"]
    errors = []
    if library_choice:
        if b["chosen_by"] != "OpenBLAS" or b["core"] != b["core_at_load"]:
            errors.append(f"expected OpenBLAS's own core, got {b}")
        if not errors:
            print("blas OK: chosen by OpenBLAS, the core it loaded with")
    else:
        tier = cpu_tier()
        if b["library"] != "OpenBLAS" or not re.fullmatch(r"\d+\.\d+\.\d+", b["version"]):
            errors.append(f"library/version: {b['library']} {b['version']}")
        if b["cpu_isa"] != tier:
            errors.append(f"cpu_isa {b['cpu_isa']}, /proc/cpuinfo says {tier}")
        if CORE_TIER.get(b["core"].lower(), 0) < TIERS[tier]:
            errors.append(f"core {b['core']} (chosen by {b['chosen_by']}, "
                          f"loaded {b['core_at_load']}) is below the CPU's {tier}")
        st = b["self_test"]
        if st["max_rel_error"] is None or not 0 <= st["max_rel_error"] <= 1e-5:
            errors.append(f"self-test error {st['max_rel_error']}")
        if b["warning"] is not None:
            errors.append(f"warning: {b['warning']}")
        if not errors:
            print(f"blas OK: OpenBLAS {b['version']}, core of the CPU's tier, "
                  "self-test passed, no warning")
    for e in errors:
        print("blas FAILED:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
