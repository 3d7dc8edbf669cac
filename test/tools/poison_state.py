#!/usr/bin/env python3
"""Writes an inf or nan into saved state, for fsdp-run's non-finite tests.

usage: poison_state.py safetensors IN OUT NAME VALUE
       poison_state.py checkpoint DIR FQN VALUE

safetensors: copies IN to OUT with element 0 of tensor NAME (F32) set to
VALUE ("inf", "-inf" or "nan"). checkpoint: sets element 0 of FQN's first
saved range (its "master", else "param"; F32) in the checkpoint directory
DIR to VALUE and rewrites that file's CRC-32 in index.json, so that only the
value is wrong (runtime/docs/checkpoints.md has the format). Stdlib only.
"""
import json
import os
import struct
import sys
import zlib


def poison_safetensors(src, dst, name, value):
    with open(src, "rb") as f:
        blob = bytearray(f.read())
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    entry = header[name]
    if entry["dtype"] != "F32":
        sys.exit(f"{name} is {entry['dtype']}, not F32")
    at = 8 + n + entry["data_offsets"][0]
    blob[at:at + 4] = struct.pack("<f", value)
    with open(dst, "wb") as f:
        f.write(blob)


def poison_checkpoint(d, fqn, value):
    ipath = os.path.join(d, "index.json")
    with open(ipath) as f:
        index = json.load(f)
    tensors = {(t["fqn"], t["role"]): t for t in index["tensors"]}
    t = tensors.get((fqn, "master")) or tensors[(fqn, "param")]
    if t["dtype"] != "f32":
        sys.exit(f"{fqn} is {t['dtype']}, not f32")
    r = t["ranges"][0]
    entry = index["files"][r["file"]]
    path = os.path.join(d, entry["path"])
    with open(path, "r+b") as f:
        f.seek(r["offset"])
        f.write(struct.pack("<f", value))
    with open(path, "rb") as f:
        entry["crc32"] = zlib.crc32(f.read())
    with open(ipath, "w") as f:
        json.dump(index, f, indent=1)


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "safetensors":
        poison_safetensors(sys.argv[2], sys.argv[3], sys.argv[4],
                           float(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "checkpoint":
        poison_checkpoint(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
