#!/usr/bin/env python3
"""Step time of the main-job model by prefetch schedule x fsdp-run --progress mode.

usage: bench/progress_overlap.py [--bin DIR] [--run-bin DIR] [--np 2,4] [--reps 5]
           [--steps 40] [--warmup 10] [--hidden 128] [--prefetch none,auto]
           [--modes none,test,thread] [--no-quiet] [--out results.json]

Compiles the main job (tools/scripts/run-main.sh: GPT-2 architecture, 4 layers,
4 heads, vocabulary 256, sequence 64, global batch 16; --hidden changes the
width, hence the message sizes) for each world size and each `prefetch=` value
of the pipeline, then runs every (prefetch, progress) configuration for
--steps steps, --reps times, alternating: repeat r runs the configurations in
the list rotated by r, so that slow drifts in the machine's background load hit
every configuration alike. Per run it takes fsdp-run's mean step time over the
steps after --warmup (max over ranks per step). Prints per configuration the
median of the runs' means with min and max, and the ratio to the baseline
(the first prefetch value with progress `test`) computed within each repeat
(median [min, max]). Timings only; nothing is asserted.

On a machine shared with other work (builds), every run goes through
bench/quiet_run.py: it starts when the CPUs are idle and is repeated when
other processes used more than 0.3 cores while it ran (--no-quiet: off).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,vader", OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1")


def compile_job(bin_dir, tmp, np, prefetch, hidden):
    mlir = os.path.join(tmp, "gpt2-h%d.mlir" % hidden)
    if not os.path.exists(mlir):
        subprocess.run([os.path.join(bin_dir, "fsdp-import"),
                        os.path.join(ROOT, "test/lit/Inputs/models/gpt2.json"), "--layers", "4",
                        "--hidden", str(hidden), "--heads", "4", "--vocab", "256", "--seq", "64",
                        "--batch", "16", "-o", mlir], check=True)
    out = os.path.join(tmp, "gpt2-h%d-np%d-%s.json" % (hidden, np, prefetch))
    opts = ("world-size=%d policy=block optimizer=adamw lr=1e-3 weight-decay=0.1 prefetch=%s"
            % (np, prefetch))
    planned = subprocess.run([os.path.join(bin_dir, "fsdp-opt"), mlir, "--fsdp-pipeline=" + opts],
                             check=True, capture_output=True, text=True).stdout
    subprocess.run([os.path.join(bin_dir, "fsdp-translate"), "--fsdp-to-schedule", "-o", out],
                   input=planned, check=True, text=True)
    return out


def run(run_bin, np, sched, mode, steps, warmup, extra, quiet):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np),
           os.path.join(run_bin, "fsdp-run"), sched, "--steps", str(steps), "--warmup",
           str(warmup), "--seed", "0", "--data", os.path.join(ROOT, "test/data/tinyshakespeare.txt"),
           "--progress", mode, *extra]
    if quiet:
        cmd = [sys.executable, os.path.join(ROOT, "bench/quiet_run.py"), "--"] + cmd
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit("fsdp-run failed: %s\n%s" % (" ".join(cmd), p.stderr))
    s = json.loads(p.stdout.strip().splitlines()[-1])
    s["background"] = -1.0
    for line in p.stderr.splitlines():
        if line.startswith("quiet_run: background "):
            s["background"] = float(line.split()[2])
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    ap.add_argument("--run-bin", default=None, help="fsdp-run's directory (default --bin)")
    ap.add_argument("--np", default="2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--prefetch", default="none,auto")
    ap.add_argument("--modes", default="none,test,thread")
    ap.add_argument("--extra", default="", help="more fsdp-run arguments")
    ap.add_argument("--no-quiet", action="store_true",
                    help="do not wait for a quiet machine (bench/quiet_run.py)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    run_bin = a.run_bin or a.bin
    prefetches, modes = a.prefetch.split(","), a.modes.split(",")
    tmp = tempfile.mkdtemp()
    results = {}
    for np in [int(x) for x in a.np.split(",")]:
        configs = [(pf, m) for pf in prefetches for m in modes]
        scheds = {pf: compile_job(a.bin, tmp, np, pf, a.hidden) for pf in prefetches}
        runs = {c: [] for c in configs}
        for r in range(a.reps):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for pf, m in order:
                s = run(run_bin, np, scheds[pf], m, a.steps, a.warmup, a.extra.split(),
                      not a.no_quiet)
                runs[(pf, m)].append({"mean": s["step_time_mean_s"], "median": s["step_time_s"],
                                      "wait": s["comm_wait_time_s"],
                                      "background_cores": s["background"],
                                      "compute": s["compute_time_s"]})
                print("np %d rep %d prefetch %-5s progress %-6s mean %.4f s median %.4f s "
                      "(compute %.4f, wait %.4f; background %.2f cores)"
                      % (np, r, pf, m, s["step_time_mean_s"], s["step_time_s"],
                         s["compute_time_s"], s["comm_wait_time_s"], s["background"]), flush=True)
        base = (prefetches[0], "test" if "test" in modes else modes[0])
        print("\nnp %d, hidden %d, %d steps (%d warm-up), %d repeats; load average %s" %
              (np, a.hidden, a.steps, a.warmup, a.reps, os.getloadavg()))
        print("%-9s %-8s %-28s %-26s %s" % ("prefetch", "progress", "step s: median [min, max]",
                                            "ratio to %s/%s" % base, "comm wait s"))
        for c in configs:
            means = [x["mean"] for x in runs[c]]
            ratios = [x["mean"] / b["mean"] for x, b in zip(runs[c], runs[base])]
            print("%-9s %-8s %.4f [%.4f, %.4f]      %.3f [%.3f, %.3f]         %.4f" %
                  (c[0], c[1], statistics.median(means), min(means), max(means),
                   statistics.median(ratios), min(ratios), max(ratios),
                   statistics.median(x["wait"] for x in runs[c])))
        results[np] = {"%s/%s" % c: v for c, v in runs.items()}
        print(flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"hidden": a.hidden, "steps": a.steps, "warmup": a.warmup,
                       "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
