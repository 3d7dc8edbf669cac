#!/usr/bin/env python3
"""Compares an fsdp-run at world size N with a reference run (world size 1).

Usage: fsdp_compare.py [--tol T] [--loss-tol L] [--key-bias-abs X] REF_LOG REF_PARAMS RUN_LOG RUN_PARAMS

REF_LOG / RUN_LOG: fsdp-run's standard output (its last line is the JSON
summary). REF_PARAMS / RUN_PARAMS: files written by `fsdp-run --dump-params`.
A run resumed from a checkpoint (summary `first_step` > 1) is compared with
the reference's steps from that step on.

Checks, each against the relative tolerance T (default 1e-5):
  - the loss at every step: |a - b| / |b| (against L, default T)
  - the gradient norm at every step, where both runs report one
    (`grad_norms`): |a - b| / |b| (against L); a non-finite norm (null: an
    overflowed step) must be non-finite in both
  - every gathered parameter tensor and optimizer-state tensor:
    ||a - b||_2 / ||b||_2 (absolute norm when ||b|| = 0)
With --key-bias-abs X, the middle third of every GPT-2 `*.attn.c_attn.bias`
parameter (the attention key bias, whose true gradient is identically zero:
softmax ignores a constant added to a query's scores, so AdamW turns its
rounding noise into steps of up to lr; test/tools/hf_parity.py) is held to
|a - b| <= X (steps * lr) per element instead and left out of the norm.
Prints the worst error of each kind; exits 1 naming the first violation.
Only the Python standard library is used.
"""
import json
import math
import sys


def summary(path):
    with open(path) as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    if not lines:
        sys.exit(f"fsdp_compare: {path} is empty")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        sys.exit(f"fsdp_compare: the last line of {path} is not the JSON summary: {e}")


def rel_norm(a, b):
    if len(a) != len(b):
        return math.inf
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    ref = math.sqrt(sum(y * y for y in b))
    return diff / ref if ref > 0 else diff


def main(argv):
    tol, loss_tol, key_bias_abs = 1e-5, None, None
    while len(argv) > 2 and argv[1] in ("--tol", "--loss-tol", "--key-bias-abs"):
        if argv[1] == "--tol":
            tol = float(argv[2])
        elif argv[1] == "--loss-tol":
            loss_tol = float(argv[2])
        else:
            key_bias_abs = float(argv[2])
        argv = argv[:1] + argv[3:]
    if loss_tol is None:
        loss_tol = tol
    if len(argv) != 5:
        sys.exit(__doc__)
    ref, run = summary(argv[1]), summary(argv[3])
    with open(argv[2]) as f:
        ref_params = json.load(f)
    with open(argv[4]) as f:
        run_params = json.load(f)

    failures = []
    skip = run.get("first_step", 1) - ref.get("first_step", 1)
    if skip < 0:
        sys.exit(f"fsdp_compare: the run starts at step {run['first_step']}, before the reference")
    ref["losses"] = ref["losses"][skip:]
    if len(ref["losses"]) != len(run["losses"]):
        failures.append(f"step count differs: {len(ref['losses'])} vs {len(run['losses'])}")
    worst_loss = 0.0
    for step, (b, a) in enumerate(zip(ref["losses"], run["losses"]), start=run.get("first_step", 1)):
        err = abs(a - b) / abs(b)
        worst_loss = max(worst_loss, err)
        if not err <= loss_tol:
            failures.append(f"loss at step {step}: {a} vs {b} (relative error {err:.3g} > {loss_tol})")

    ref_norms = ref.get("grad_norms", [])[skip:]
    run_norms = run.get("grad_norms", [])
    if ref_norms and run_norms:
        for step, (b, a) in enumerate(zip(ref_norms, run_norms), start=run.get("first_step", 1)):
            # A non-finite norm (an overflowed, skipped step) is null.
            if a is None or b is None:
                if (a is None) != (b is None):
                    failures.append(f"gradient norm at step {step}: {a} vs {b} (one not finite)")
                continue
            err = abs(a - b) / abs(b)
            worst_loss = max(worst_loss, err)
            if not err <= loss_tol:
                failures.append(f"gradient norm at step {step}: {a} vs {b} (relative error {err:.3g} > {loss_tol})")

    worst = {}
    for section in ("params", "exp_avg", "exp_avg_sq"):
        refs = ref_params.get(section, {})
        runs = run_params.get(section, {})
        if section == "params" and not refs:
            failures.append("the reference dump has no parameters")
        if set(refs) != set(runs):
            failures.append(f"{section}: tensors differ: {sorted(set(refs) ^ set(runs))}")
            continue
        for fqn in refs:
            if refs[fqn]["shape"] != runs[fqn]["shape"]:
                failures.append(f"{section} {fqn}: shape {runs[fqn]['shape']} vs {refs[fqn]['shape']}")
                continue
            a, b = runs[fqn]["data"], refs[fqn]["data"]
            if key_bias_abs is not None and section == "params" and fqn.endswith(".attn.c_attn.bias"):
                lo, hi = len(b) // 3, 2 * len(b) // 3
                noise = max(abs(x - y) for x, y in zip(a[lo:hi], b[lo:hi]))
                if not noise <= key_bias_abs:
                    failures.append(f"{fqn} key-bias third: |diff| {noise:.3g} > {key_bias_abs}")
                a, b = a[:lo] + a[hi:], b[:lo] + b[hi:]
            err = rel_norm(a, b)
            if err > worst.get(section, (0.0, ""))[0] or section not in worst:
                worst[section] = (err, fqn)
            if not err <= tol:
                failures.append(f"{section} {fqn}: relative error {err:.3g} > {tol}")

    print(f"world size {run['world_size']} vs {ref['world_size']}: worst loss error {worst_loss:.3g}"
          + "".join(f", worst {s} error {e:.3g} ({n})" for s, (e, n) in worst.items()))
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
