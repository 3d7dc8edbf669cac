#!/usr/bin/env python3
"""Variants of a fixture's model.safetensors for fsdp-run's --init-from tests.

usage: make_bad_safetensors.py FIXTURE_DIR OUT_DIR

Writes into OUT_DIR (stdlib only, so CI needs nothing else):
  good: prefixless.safetensors (names without "model." / "transformer.", as
        the original GPT-2 release), bf16.safetensors and f16.safetensors
        (every tensor rounded to BF16 / F16), f64.safetensors, sharded/ (two shard files + model.safetensors.index.json)
  bad:  missing.safetensors (one tensor dropped), extra.safetensors (an
        unknown tensor), lm_head.safetensors (an lm_head.weight for a tied
        model), shape.safetensors (one shape permuted), dtype.safetensors
        (one tensor I32), truncated.safetensors (last 100 bytes cut),
        badjson.safetensors (header not JSON), hugelen.safetensors (header
        length 2^40), badindex/ (weight_map names a file that lacks the
        tensor)
  data: odd.bin (odd byte count), bigid.bin (token id 64 = the vocabulary
        at token index 5)
Prints the name of the dropped tensor and of the reshaped one.
"""
import json
import os
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {k: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
               for k, e in header.items()}
    return meta, tensors


def write(path, tensors, meta=None):
    header, blob = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


def to_bf16(raw):
    vals = struct.unpack("<%df" % (len(raw) // 4), raw)
    out = []
    for v in vals:
        b = struct.unpack("<I", struct.pack("<f", v))[0]
        b += 0x7FFF + ((b >> 16) & 1)  # round to nearest even
        out.append(b >> 16)
    return struct.pack("<%dH" % len(out), *out)


def main(fixture, out):
    os.makedirs(out, exist_ok=True)
    meta, t = read(os.path.join(fixture, "model.safetensors"))
    names = list(t)
    p = lambda name: os.path.join(out, name)

    write(p("prefixless.safetensors"),
          {k.split(".", 1)[1] if k.startswith(("model.", "transformer.")) else k: v
           for k, v in t.items()})
    write(p("bf16.safetensors"), {k: ("BF16", s, to_bf16(r)) for k, (d, s, r) in t.items()})
    f32 = lambda r: struct.unpack("<%df" % (len(r) // 4), r)
    write(p("f16.safetensors"), {k: ("F16", s, struct.pack("<%de" % (len(r) // 4), *f32(r)))
                                 for k, (d, s, r) in t.items()})
    write(p("f64.safetensors"), {k: ("F64", s, struct.pack("<%dd" % (len(r) // 4), *f32(r)))
                                 for k, (d, s, r) in t.items()})
    os.makedirs(p("sharded"), exist_ok=True)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half],
             "model-00002-of-00002.safetensors": names[half:]}
    for file, ks in parts.items():
        write(os.path.join(out, "sharded", file), {k: t[k] for k in ks})
    json.dump({"metadata": {"total_size": sum(len(v[2]) for v in t.values())},
               "weight_map": {k: f for f, ks in parts.items() for k in ks}},
              open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w"))

    dropped = names[-1]
    write(p("missing.safetensors"), {k: v for k, v in t.items() if k != dropped})
    write(p("extra.safetensors"), dict(t, **{"model.extra.weight": ("F32", [2], b"\0" * 8)}))
    embed = next(k for k in names if "embed_tokens" in k or "wte" in k)
    write(p("lm_head.safetensors"), dict(t, **{"lm_head.weight": t[embed]}))
    reshaped = next(k for k in names if len(t[k][1]) == 2 and t[k][1][0] != t[k][1][1])
    d, s, r = t[reshaped]
    write(p("shape.safetensors"), dict(t, **{reshaped: (d, s[::-1], r)}))
    write(p("dtype.safetensors"), dict(t, **{reshaped: ("I32", s, r)}))
    raw = open(os.path.join(fixture, "model.safetensors"), "rb").read()
    open(p("truncated.safetensors"), "wb").write(raw[:-100])
    bad = b"{not json" + b" " * 7
    open(p("badjson.safetensors"), "wb").write(struct.pack("<Q", len(bad)) + bad)
    open(p("hugelen.safetensors"), "wb").write(struct.pack("<Q", 1 << 40) + b"{}")
    os.makedirs(p("badindex"), exist_ok=True)
    write(os.path.join(out, "badindex", "a.safetensors"), {k: t[k] for k in names[:half]})
    json.dump({"weight_map": {k: "a.safetensors" for k in names}},
              open(os.path.join(out, "badindex", "model.safetensors.index.json"), "w"))

    ids = list(struct.unpack("<97H", open(os.path.join(fixture, "batch.bin"), "rb").read()))
    open(p("odd.bin"), "wb").write(struct.pack("<97H", *ids)[:-1])
    ids[5] = 64
    open(p("bigid.bin"), "wb").write(struct.pack("<97H", *ids))
    print("dropped", dropped)
    print("reshaped", reshaped)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
