#!/usr/bin/env python3
"""The compiled step equals the interpreted one, bit for bit.

Usage: compiled_equality.py --mpirun CMD --work DIR [--steps K] [--data FILE]
                            NAME:NP:MODEL.mlir:PIPELINE-OPTIONS ...

For each configuration: `fsdp-opt MODEL --fsdp-pipeline="world-size=NP
OPTIONS"`, then `fsdp-translate --fsdp-to-schedule` (the JSON schedule) and
`fsdp-compile` (STEP.so) of that same scheduled IR, then K steps of
`CMD -np NP fsdp-run` on each (same seed and data). The two runs must agree
exactly: every step's loss in the JSON summary (doubles as printed by
nlohmann::json, which round-trips) and the whole --dump-params file
(parameters, or their f32 masters, and both AdamW moments of every unit,
gathered, printed with %.9g for f32 / %.17g for f64: round-trip exact). The
summaries must also say which path ran ("step": interpreted / compiled).
Prints one line per configuration; exits 1 at the first difference.
Only the Python standard library is used.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("compiled_equality: command failed (%d): %s\n%s%s" %
                 (p.returncode, " ".join(map(str, cmd)), p.stdout[-2000:],
                  p.stderr[-2000:]))
    return p.stdout


def summary(text):
    return json.loads([l for l in text.splitlines() if l.strip()][-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--data", default="")
    ap.add_argument("configs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    mpirun = shlex.split(a.mpirun)
    for cfg in a.configs:
        name, np, model, opts = cfg.split(":", 3)
        base = os.path.join(a.work, name)
        run(["fsdp-opt", model,
             "--fsdp-pipeline=world-size=%s %s" % (np, opts), "-o",
             base + ".mlir"])
        run(["fsdp-translate", base + ".mlir", "--fsdp-to-schedule", "-o",
             base + ".json"])
        run(["fsdp-compile", base + ".mlir", "-o", base + ".so"])
        common = ["--steps", str(a.steps), "--seed", "3"]
        if a.data:
            common += ["--data", a.data]
        logs = {}
        for mode, step in (("interpreted", [base + ".json"]),
                           ("compiled", ["--compiled", base + ".so"])):
            dump = "%s-%s-p.json" % (base, mode)
            out = run(mpirun + ["-np", np, "fsdp-run"] + step + common +
                      ["--dump-params", dump])
            s = summary(out)
            if s.get("step") != mode:
                sys.exit("compiled_equality: %s: the %s run's summary says "
                         "step %r" % (name, mode, s.get("step")))
            with open(dump, "rb") as f:
                # The per-step rates and gradient norms the step computed
                # (lr-schedule, max-grad-norm) must agree too.
                logs[mode] = ((s["losses"], s.get("lrs"), s.get("grad_norms")),
                              f.read())
        (li, pi), (lc, pc) = logs["interpreted"], logs["compiled"]
        if li != lc:
            sys.exit("compiled_equality: %s: losses, lrs or grad_norms differ: "
                     "interpreted %r, compiled %r" % (name, li, lc))
        li = li[0]
        if pi != pc:
            sys.exit("compiled_equality: %s: --dump-params differ (%d vs %d "
                     "bytes)" % (name, len(pi), len(pc)))
        print("%s: world size %s, %d steps: losses %s and %d bytes of "
              "parameters and moments identical" %
              (name, np, a.steps, " ".join("%.6f" % l for l in li), len(pi)))


if __name__ == "__main__":
    main()
