#!/usr/bin/env python3
"""Summarises bench/gpu/ncu_step.sh's Nsight Compute CSV by kernel.

usage: python3 bench/gpu/ncu_summary.py NCU_STEP.csv [--top N]

Reads the raw page (one row per kernel launch: gpu__time_duration.sum,
dram__bytes_read.sum, dram__bytes_write.sum, with ncu's units row), leaves
out the launches up to the last parameter-init kernel (initValuesK: fsdp-run
initialises before its first step), and prints per kernel name (template
arguments cut) the launches, total milliseconds, share of the step and
achieved DRAM bandwidth ((read + write) / duration, GB/s), the top N
(default 25) by time, and the step's kernel total.
"""
import argparse
import collections
import csv
import sys

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
         "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def rows(path):
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_summary.py: no ncu CSV header (\"ID\",...) in %s" % path)
    r = list(csv.reader(lines[start:]))
    if len(r) < 2:
        sys.exit("ncu_summary.py: %s has ncu's header but no units row" % path)
    head, units = r[0], r[1]
    for rec in r[2:]:
        if len(rec) != len(head):
            continue  # the program's own output after the CSV
        d = dict(zip(head, rec))
        for m, u in zip(head, units):
            if m.startswith(("gpu__", "dram__")) and m.endswith(".sum"):
                if u not in SCALE:
                    sys.exit("ncu_summary.py: unknown unit %r of %s" % (u, m))
                d[m] = float(d[m].replace(",", "")) * SCALE[u]
        yield d


def short(name):
    """A kernel's name without its template arguments and parameters."""
    depth, out = 0, []
    for ch in name.replace("(anonymous namespace)::", "").replace("<unnamed>::", ""):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("void ", "").strip()


def main():
    ap = argparse.ArgumentParser(usage=__doc__.strip().splitlines()[2].split(": ", 1)[1])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if args.top < 1:
        ap.error("--top must be at least 1")
    launches = list(rows(args.csv))
    for need in ("Kernel Name", "gpu__time_duration.sum"):
        if launches and need not in launches[0]:
            sys.exit("ncu_summary.py: %s has no %r column (run bench/gpu/ncu_step.sh's "
                     "metrics)" % (args.csv, need))
    last_init = max((i for i, d in enumerate(launches) if "initValuesK" in d["Kernel Name"]),
                    default=-1)
    step = launches[last_init + 1:]
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for d in step:
        a = agg[short(d["Kernel Name"])]
        a[0] += 1
        a[1] += d["gpu__time_duration.sum"]
        a[2] += d.get("dram__bytes_read.sum", 0) + d.get("dram__bytes_write.sum", 0)
    total = sum(a[1] for a in agg.values())
    print("%d kernel launches in the step (%d before it, parameter init), %.2f ms of kernels" %
          (len(step), last_init + 1, total * 1e3))
    print("%-60s %6s %9s %6s %8s" % ("kernel", "calls", "ms", "share", "GB/s"))
    for name, (n, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print("%-60s %6d %9.3f %5.1f%% %8.0f" % (name[:60], n, t * 1e3,
                                                 100 * t / total if total else 0,
                                                 b / t / 1e9 if t else 0))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError) as e:  # unreadable file, a value not a number
        sys.exit("ncu_summary.py: error: %s: %s" % (type(e).__name__, e))
