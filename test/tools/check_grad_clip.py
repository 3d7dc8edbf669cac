#!/usr/bin/env python3
"""Checks fsdp-run's global gradient norm and clipping.

Usage:
  check_grad_clip.py half LOG
      Prints half of the first step's grad_norm (the clipping threshold of
      the equality test).
  check_grad_clip.py norms MAX REF_LOG RUN_LOG [TOL]
      The run's grad_norms equal the reference's within TOL (relative,
      default 1e-5) and exceed MAX at every step (the clipping was active).
  check_grad_clip.py sgd MAX LOG_LR1 P_LR1 LOG_LR2 P_LR2 LOG_CLIP P_CLIP
      Independent of the runtime's norm: three one-step SGD runs (weight
      decay 0) from the same initialisation, lr 1 and lr 2 unclipped and
      lr 1 clipped at MAX, with their --dump-params files. Then g = p1 - p2
      (the gradient, every parameter), p0 = p1 + g, and the L2 norm of g
      computed here must equal the reported grad_norm of each run (1e-5),
      and the clipped run's parameters p0 - min(1, MAX / (|g| + 1e-6)) * g
      (torch.nn.utils.clip_grad_norm_), within 1e-5 of |g|.
Exits 1 naming the first violation.
"""
import json
import math
import sys


def summary(path):
    with open(path) as f:
        return json.loads([l for l in f.read().splitlines() if l.strip()][-1])


def params(path):
    with open(path) as f:
        p = json.load(f)["params"]
    return {k: v["data"] for k, v in sorted(p.items())}


def close(a, b, tol):
    return abs(a - b) <= tol * max(abs(b), 1e-30)


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "half" and len(argv) == 3:
        print(repr(summary(argv[2])["grad_norms"][0] / 2))
    elif mode == "norms" and len(argv) in (5, 6):
        limit, ref, run = float(argv[2]), summary(argv[3]), summary(argv[4])
        tol = float(argv[5]) if len(argv) == 6 else 1e-5
        a, b = run["grad_norms"], ref["grad_norms"]
        if len(a) != len(b) or len(a) != run["steps"]:
            sys.exit(f"{len(a)} norms vs {len(b)} in the reference")
        for i, (x, y) in enumerate(zip(a, b), start=1):
            if not close(x, y, tol):
                sys.exit(f"step {i}: grad_norm {x!r} vs {y!r} at world size 1")
            if not x > limit:
                sys.exit(f"step {i}: grad_norm {x!r} does not exceed max-grad-norm {limit!r}: not clipped")
        worst = max(abs(x - y) / y for x, y in zip(a, b))
        print(f"world size {run['world_size']}: {len(a)} grad_norms == world size 1 "
              f"(worst {worst:.1e}), all above max-grad-norm")
    elif mode == "sgd" and len(argv) == 9:
        limit = float(argv[2])
        runs = [(summary(argv[i]), params(argv[i + 1])) for i in (3, 5, 7)]
        (s1, p1), (s2, p2), (sc, pc) = runs
        g = {k: [a - b for a, b in zip(p1[k], p2[k])] for k in p1}
        norm = math.sqrt(sum(x * x for v in g.values() for x in v))
        for s in (s1, s2, sc):
            if not close(s["grad_norms"][0], norm, 1e-5):
                sys.exit(f"reported grad_norm {s['grad_norms'][0]!r}, |g| from the parameters {norm!r}")
        coef = min(1.0, limit / (norm + 1e-6))
        if not coef < 1:
            sys.exit(f"max-grad-norm {limit} does not clip |g| = {norm}")
        worst = 0.0
        for k in g:
            for x1, gi, xc in zip(p1[k], g[k], pc[k]):
                want = (x1 + gi) - coef * gi
                worst = max(worst, abs(xc - want))
                if abs(xc - want) > 1e-5 * norm:
                    sys.exit(f"{k}: clipped update {xc!r}, expected {want!r} (coef {coef})")
        print(f"world size {sc['world_size']}: grad_norm == |p(lr 1) - p(lr 2)| = {norm:.6g}; "
              f"clipped update == p0 - {coef:.4f} g (worst {worst:.1e})")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
