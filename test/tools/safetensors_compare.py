#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor (fsdp-run --export).

usage: safetensors_compare.py [--tol T] [--identical] GOT REFERENCE

Both files must hold the same tensor names with the same dtypes and shapes.
Prints "N tensors, K byte-identical, worst relative difference R" (per
tensor ||a - b||_2 / ||b||_2, hf_parity.rel_norm) and "OK", or a line
starting with FAIL and exits 1: when names, dtypes or shapes differ, when a
tensor's relative difference exceeds T (default 1e-12), or, with
--identical, when any tensor's bytes differ. The header's __metadata__
(schedule name, step) and the order of the data are not compared. Only the
Python standard library is used (hf_parity.py's readers).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_parity import read_raw, read_safetensors, rel_norm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got")
    ap.add_argument("reference")
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--identical", action="store_true")
    a = ap.parse_args()
    raw, ref_raw = read_raw(a.got), read_raw(a.reference)
    if sorted(raw) != sorted(ref_raw) or any(raw[k][:2] != ref_raw[k][:2] for k in raw):
        print("FAIL: names, dtypes or shapes differ: %s vs %s"
              % (sorted((k, v[:2]) for k, v in raw.items()),
                 sorted((k, v[:2]) for k, v in ref_raw.items())))
        sys.exit(1)
    same = sum(raw[k] == ref_raw[k] for k in raw)
    got, ref = read_safetensors(a.got), read_safetensors(a.reference)
    worst, name = 0.0, ""
    for k in ref:
        r = rel_norm(got[k][1], ref[k][1])
        if r >= worst:
            worst, name = r, k
    print("%d tensors, %d byte-identical, worst relative difference %.2g (%s)"
          % (len(ref), same, worst, name))
    if worst > a.tol or (a.identical and same != len(ref)):
        print("FAIL: %s" % ("%d tensors differ in their bytes" % (len(ref) - same)
                            if worst <= a.tol else "%s exceeds %g" % (name, a.tol)))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
