#!/usr/bin/env python3
"""Writes the hand-planned fsdp schedule of a 1-layer linear classifier
(logits = x·Wᵀ + b, cross-entropy, AdamW) for a given world size, following
runtime/docs/schedule-format.md. Used by the fsdp-run end-to-end test; the compiler
generates such files for real models.

usage: gen_linear.py WORLD_SIZE DTYPE(f32|f64) OUT.json [--sgd]
"""
import json
import sys

F, C, GLOBAL_BATCH = 13, 5, 12


def padded(numel, n):
    p = (numel + n - 1) // n * n
    return max(p, n)


def main():
    n, dtype, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    sgd = "--sgd" in sys.argv
    esize = 4 if dtype == "f32" else 8
    b = GLOBAL_BATCH // n
    assert b * n == GLOBAL_BATCH, "world size must divide the global batch"
    numel = C * F + C
    pad = padded(numel, n)
    shard = pad // n

    def buf(i, shape, cls, dt=dtype, **kw):
        size = 1
        for d in shape:
            size *= d
        es = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}[dt]
        return dict(id=i, dtype=dt, shape=shape, bytes=size * es, **{"class": cls}, **kw)

    buffers = [
        buf(0, [b, F], "data"), buf(1, [b], "data", "i32"), buf(2, [], "scalar", "i64"),
        buf(3, [shard], "param_shard"), buf(4, [shard], "opt_state"), buf(5, [shard], "opt_state"),
        buf(6, [pad], "gathered_param"),
        buf(7, [C, F], "gathered_param", view_of=6, offset=0),
        buf(8, [C], "gathered_param", view_of=6, offset=C * F),
        buf(9, [b, C], "activation"), buf(10, [], "scalar"), buf(11, [], "scalar"),
        buf(12, [b, C], "grad"), buf(13, [C, F], "grad"), buf(14, [C], "grad"),
        buf(15, [pad], "grad"), buf(16, [shard], "grad_shard"),
        buf(17, [shard], "param_shard"), buf(18, [shard], "opt_state"), buf(19, [shard], "opt_state"),
    ]
    def ins(op, operands, results, attrs=None, frees=(), line=0):
        return {"op": op, "operands": operands, "results": results, "attrs": attrs or {},
                "loc": "linear.mlir:%d:3" % line, "frees": list(frees)}
    opt = {"kind": "adamw", "lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
           "weight_decay": 0.01}
    if sgd:
        opt = {"kind": "sgd", "lr": 0.5, "weight_decay": 0.0}
    instructions = [
        ins("fsdp.all_gather", [3], [6], {"unit": "fc"}, line=1),
        ins("fsdp.param_view", [6], [7], {"fqn": "fc.weight", "offset": 0}, line=2),
        ins("fsdp.param_view", [6], [8], {"fqn": "fc.bias", "offset": C * F}, line=3),
        ins("nn.linear", [0, 7, 8], [9], line=4),
        ins("nn.cross_entropy", [9, 1], [10], line=5),
        ins("arith.constant", [], [11], {"value": 1.0}, line=6),
        ins("nn.cross_entropy_grad", [9, 1, 11], [12], frees=[9, 1, 11], line=7),
        ins("nn.matmul", [12, 0], [13], {"transpose_a": True, "transpose_b": False},
            frees=[0], line=8),
        ins("nn.reduce_sum", [12], [14], {"axes": [0]}, frees=[12], line=9),
        ins("fsdp.free", [6], [], line=10),
        ins("fsdp.flatten", [13, 14], [15], {"offsets": [0, C * F], "unit": "fc"},
            frees=[13, 14], line=11),
        ins("fsdp.reduce_scatter", [15], [16], {"unit": "fc", "op": "avg"}, frees=[15], line=12),
    ]
    inputs = [
        {"buffer": 0, "role": "features", "global_shape": [GLOBAL_BATCH, F]},
        {"buffer": 1, "role": "labels", "global_shape": [GLOBAL_BATCH]},
        {"buffer": 2, "role": "step"},
        {"buffer": 3, "role": "param", "unit": "fc"},
    ]
    outputs = [{"buffer": 10, "role": "loss"}, {"buffer": 17, "role": "param", "unit": "fc"}]
    if sgd:
        instructions.append(ins("nn.sgd_update", [3, 16], [17],
                                {"lr": opt["lr"], "weight_decay": 0.0}, frees=[3, 16, 2], line=13))
        buffers = [x for x in buffers if x["id"] not in (4, 5, 18, 19)]
    else:
        instructions.append(ins("nn.adamw_update", [3, 16, 4, 5, 2], [17, 18, 19],
                                {k: opt[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay")},
                                frees=[3, 16, 4, 5, 2], line=13))
        inputs += [{"buffer": 4, "role": "exp_avg", "unit": "fc"},
                   {"buffer": 5, "role": "exp_avg_sq", "unit": "fc"}]
        outputs += [{"buffer": 18, "role": "exp_avg", "unit": "fc"},
                    {"buffer": 19, "role": "exp_avg_sq", "unit": "fc"}]
    bound = (1.0 / F) ** 0.5
    sched = {
        "format": "fsdp-schedule", "version": 1, "function": "forward", "world_size": n,
        "global_batch": GLOBAL_BATCH, "optimizer": opt,
        "units": [{"name": "fc", "dtype": dtype, "numel": numel, "padded_numel": pad,
                   "shard_numel": shard, "params": [
                       {"fqn": "fc.weight", "shape": [C, F], "offset": 0, "numel": C * F,
                        "init": "uniform(%.5f)" % bound, "trainable": True},
                       {"fqn": "fc.bias", "shape": [C], "offset": C * F, "numel": C,
                        "init": "uniform(%.5f)" % bound, "trainable": True}]}],
        "buffers": buffers, "inputs": inputs, "outputs": outputs, "instructions": instructions,
    }
    with open(out, "w") as f:
        json.dump(sched, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
