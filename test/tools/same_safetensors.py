#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor, bit for bit.

usage: same_safetensors.py A B
Prints "identical: N tensors" (exit 0), or the names that differ in only one
file, in dtype, shape or bytes (exit 1). The order of tensors in the files
and __metadata__ are ignored. Stdlib only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_parity import read_raw  # noqa: E402

a, b = read_raw(sys.argv[1]), read_raw(sys.argv[2])
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
if diff:
    print("differ: %d tensors: %s" % (len(diff), ", ".join(diff[:5])))
    sys.exit(1)
print("identical: %d tensors" % len(a))
