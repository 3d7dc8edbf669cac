#!/usr/bin/env python3
"""Checks that fsdp-run reports a mixed-precision loss at f32 resolution.

Usage: check_loss_resolution.py DTYPE RUN_LOG [REF_LOG TOL [STEPS]]

RUN_LOG / REF_LOG: fsdp-run's standard output (its last line is the JSON
summary, whose `losses` are the f32 losses as doubles). DTYPE (bf16 or f16)
is the run's param-dtype. Prints, for RUN_LOG, how many of its losses are
numbers of DTYPE (a loss rounded to DTYPE is one, always; an f32 loss is one
with probability 2^-16 for bf16, 2^-13 for f16) and how many distinct values
they take; with REF_LOG (an f32 run of the same model, or the interpreted run of
a compiled one with TOL 0), whether the first STEPS (default 1) losses
agree within TOL absolute (bf16's spacing near 5.5
is 2^-5 = 0.031, near 2.3 it is 2^-6 = 0.0156; f16's near 2.3 is 2^-9).
Exits 1 on a violation. Only the Python standard library is used.
"""
import json
import struct
import sys


def losses(path):
    with open(path) as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    return json.loads(lines[-1])["losses"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def is_bf16(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return f32(x) == x and bits & 0xFFFF == 0


def is_f16(x):
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0] == x
    except OverflowError:
        return False


def main():
    if len(sys.argv) not in (3, 5, 6) or sys.argv[1] not in ("bf16", "f16"):
        sys.exit(__doc__)
    dtype, run = sys.argv[1], losses(sys.argv[2])
    on_grid = sum(1 for x in run if (is_bf16 if dtype == "bf16" else is_f16)(x))
    print(f"{len(run)} losses, {len(set(run))} distinct, {on_grid} are {dtype} numbers")
    ok = on_grid == 0
    if len(sys.argv) >= 5:
        ref, tol = losses(sys.argv[3]), float(sys.argv[4])
        steps = int(sys.argv[5]) if len(sys.argv) == 6 else 1
        worst = max(abs(a - b) for a, b in zip(run[:steps], ref[:steps]))
        print(f"first {steps} losses within {tol:g} of the reference: {worst <= tol} (worst {worst:.3g})")
        ok &= worst <= tol
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
