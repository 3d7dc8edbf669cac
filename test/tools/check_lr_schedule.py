#!/usr/bin/env python3
"""Checks fsdp-run's per-step learning rates against the schedule's formula.

Usage: check_lr_schedule.py KIND LR WARMUP DECAY MIN_LR LOG [LOG...]

KIND is constant, linear or cosine. Each LOG is fsdp-run's standard output:
its per-step lines ("step s loss x lr r ...") and its JSON summary (last
line, "lrs" one per step, "first_step"). The rate of optimizer step t
(1-based) is computed here, independently of the runtime, from the lambdas
of Hugging Face transformers (src/transformers/optimization.py,
_get_constant_schedule_with_warmup_lr_lambda,
_get_linear_schedule_with_warmup_lr_lambda,
_get_cosine_schedule_with_warmup_lr_lambda with num_cycles=0.5) evaluated
at LambdaLR's step t - 1: the warm-up from 0 (lr_t = LR * f(t - 1) while
t - 1 < WARMUP), then the decay to MIN_LR, held there from the decay's end on
(as nanoGPT and torchtitan; transformers' cosine would rise): lr_t = MIN_LR +
(LR - MIN_LR) * f(t - 1), transformers'
get_cosine_with_min_lr_schedule_with_warmup(min_lr=MIN_LR) for the cosine
(its lambda's factor * (1 - min_lr_rate) + min_lr_rate, times LR). A resumed
run (first_step > 1)
is checked from its first step on. Prints one line per log; exits 1 on the
first rate off by more than 1e-12 relative (or a printed rate off by more
than its 6 significant digits).
"""
import json
import math
import sys


def factor(kind, s, warmup, decay):
    if s < warmup:
        return float(s) / float(max(1, warmup))
    if kind == "constant":
        return 1.0
    if kind == "linear":
        return max(0.0, float(decay - s) / float(max(1, decay - warmup)))
    if s >= decay:
        return 0.0
    progress = float(s - warmup) / float(max(1, decay - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(0.5) * 2.0 * progress)))


def main(argv):
    if len(argv) < 7:
        sys.exit(__doc__)
    kind, lr, warmup, decay, min_lr = argv[1], float(argv[2]), int(argv[3]), int(argv[4]), float(argv[5])
    for path in argv[6:]:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        summary = json.loads(lines[-1])
        first = summary.get("first_step", 1)
        rates = summary["lrs"]
        printed = [float(l.split(" lr ")[1].split()[0]) for l in lines if l.startswith("step ")]
        if len(rates) != summary["steps"] or len(printed) != len(rates):
            sys.exit(f"{path}: {len(rates)} rates and {len(printed)} per-step lines for {summary['steps']} steps")
        worst = 0.0
        for i, (got, shown) in enumerate(zip(rates, printed)):
            t = first + i
            f = factor(kind, t - 1, warmup, decay)
            want = lr * f if t - 1 < warmup else min_lr + (lr - min_lr) * f
            err = abs(got - want) / abs(want) if want else abs(got)
            worst = max(worst, err)
            if not err <= 1e-12:
                sys.exit(f"{path}: step {t}: lr {got!r}, the formula gives {want!r}")
            if abs(shown - want) > 5e-6 * abs(want) + 1e-300:
                sys.exit(f"{path}: step {t}: the per-step line prints lr {shown}, the formula gives {want!r}")
        print(f"{kind}: steps {first}..{first + len(rates) - 1} of world size {summary['world_size']} "
              f"match the formula (worst relative error {worst:.1e})")


if __name__ == "__main__":
    main(sys.argv)
