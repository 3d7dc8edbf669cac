#!/usr/bin/env python3
"""End-to-end test of fsdp-run --progress (ctest fsdp-run-progress-e2e).

usage: fsdp_run_progress_e2e.py FSDP_RUN MPIRUN SCHEDULE_DIR [COMPILER_BIN_DIR]

The progress mode (none: collectives progress only when waited; test:
MPI_Test after every instruction; thread: a progress thread under
MPI_THREAD_MULTIPLE) changes when bytes move, never what is computed: every
mode must give bit-identical losses (the printed per-step lines and the
summary) and bit-identical dumped parameters and AdamW moments. Checked on the
checked-in tiny GPT-2 / Llama schedules (2 ranks) and the linear schedule on
4 ranks, and, when the compiler is built (COMPILER_BIN_DIR), on a tiny GPT-2
compiled for 4 ranks with the pipeline's default (overlapped) schedule and for
hybrid-shard (all-reduce) so that collectives are in flight while kernels run.
Also: the summary names the mode, --profile reports per-op seconds, bad values
exit 2. Timings are never asserted (bench/ measures them).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_harness import ENV, SCHED, check, finish, mpirun, tmp

MODES = ("none", "test", "thread")
BIN = sys.argv[4] if len(sys.argv) > 4 else ""
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                    "tinyshakespeare.txt")


def run(n, sched, mode, tag, *extra):
    dump = os.path.join(tmp, "%s_%s.json" % (tag, mode))
    rc, out, err = mpirun(n, sched, "--steps", "4", "--seed", "3", "--progress", mode,
                          "--dump-params", dump, *extra, timeout=120)
    if rc != 0:
        print(out, err)
        check(False, "%s --progress %s runs" % (tag, mode))
        return None
    lines = out.strip().splitlines()
    with open(dump) as f:
        params = f.read()
    return [l for l in lines if l.startswith("step ")], json.loads(lines[-1]), params


def compare(n, sched, tag, *extra):
    runs = {m: run(n, sched, m, tag, *extra) for m in MODES}
    if any(r is None for r in runs.values()):
        return
    ref_steps, ref_sum, ref_params = runs["test"]
    for m in MODES:
        steps, summ, params = runs[m]
        check(summ["progress"] == m, "%s: summary names progress %s" % (tag, m))
        if m == "test":
            continue
        check(steps == ref_steps and summ["losses"] == ref_sum["losses"],
              "%s: losses bit-identical, progress %s == test" % (tag, m))
        check(params == ref_params,
              "%s: parameters and AdamW moments bit-identical, progress %s == test"
              % (tag, m))
        check(summ["comm_bytes"] == ref_sum["comm_bytes"],
              "%s: same bytes moved, progress %s == test" % (tag, m))


text = ("--data", DATA)
compare(2, os.path.join(SCHED, "gpt2_tiny_np2.json"), "gpt2_np2", *text)
compare(2, os.path.join(SCHED, "llama_tiny_np2.json"), "llama_np2", *text)
compare(4, os.path.join(SCHED, "linear_f32_np4.json"), "linear_np4")

if BIN:
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit", "Inputs",
                          "models")
    mlir = os.path.join(tmp, "gpt2.mlir")
    subprocess.run([os.path.join(BIN, "fsdp-import"), os.path.join(models, "gpt2.json"),
                    "--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "256",
                    "--seq", "16", "--batch", "8", "-o", mlir], check=True)
    for tag, opts in (("gpt2_np4_default", "world-size=4 policy=block"),
                      ("gpt2_np4_hsdp", "world-size=4 policy=block strategy=hybrid-shard "
                                        "shard-size=2")):
        sched = os.path.join(tmp, tag + ".json")
        planned = subprocess.run([os.path.join(BIN, "fsdp-opt"), mlir,
                                  "--fsdp-pipeline=" + opts], check=True,
                                 capture_output=True, text=True).stdout
        subprocess.run([os.path.join(BIN, "fsdp-translate"), "--fsdp-to-schedule", "-o", sched],
                       input=planned, check=True, text=True)
        compare(4, sched, tag, *text)

# --profile: per-op seconds per step (mean over ranks), never negative.
rc, out, err = mpirun(2, os.path.join(SCHED, "gpt2_tiny_np2.json"), "--steps", "3", "--warmup",
                      "1", "--profile", "--progress", "thread", "--data", DATA)
summ = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {}
prof = summ.get("profile", {})
check(rc == 0 and "nn.linear" in prof and "(comm wait)" in prof and "(step set-up)" in prof,
      "--profile reports nn.linear, comm wait and step set-up")
check(all(v["seconds"] >= 0 and v["calls"] > 0 for k, v in prof.items() if k != "(step set-up)"),
      "--profile seconds >= 0 and calls > 0")
check(summ.get("timed_steps") == 2 and len(summ.get("losses", [])) == 3,
      "--warmup 1 of 3 steps: 2 timed steps, 3 losses")

# Bad values: usage error, exit 2, before MPI starts.
for args, what in ((("--progress", "sometimes"), "--progress needs none, test or thread"),
                   (("--progress-interval", "0"), "--progress-interval needs"),
                   (("--warmup", "5"), "--warmup must be smaller")):
    rc, out, err = mpirun(1, os.path.join(SCHED, "linear_f32_np1.json"), "--steps", "2", *args)
    check(rc == 2 and what in err, "%s: exit 2 with '%s'" % (" ".join(args), what))

finish()
