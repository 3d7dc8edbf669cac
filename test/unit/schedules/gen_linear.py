#!/usr/bin/env python3
"""Writes the hand-planned fsdp schedule of a 1-layer linear classifier
(logits = x·Wᵀ + b, cross-entropy, AdamW) for a given world size, following
runtime/docs/schedule-format.md. Used by the fsdp-run end-to-end test; the compiler
generates such files for real models.

usage: gen_linear.py WORLD_SIZE DTYPE(f32|f64) OUT.json [--sgd]
                     [--strategy STRATEGY] [--replicas R]
                     [--param-dtype bf16|f16] [--reduce-dtype D]
                     [--master-weights cast-on-gather|separate]

Without --strategy the file has no "strategy"/"grid" keys (full-shard, R = 1,
S = N by default). With it ("Sharding strategies" in schedule-format.md):
  full-shard, shard-grad-op  param shard -> all_gather -> ... -> reduce_scatter
                             (group shard) -> adamw on shards
  no-shard                   param full (layout "full"); grads flattened and
                             all_reduce avg (group world); adamw on full buffers
  shard-optimizer            param full; reduce_scatter (shard) ->
                             local_shard(param) -> adamw on shards ->
                             all_gather (shard) -> new full param
  hybrid-shard               grid R x N/R: all_gather and reduce_scatter over
                             group shard, then all_reduce avg over replicate

With --param-dtype P (default strategy, AdamW; "Mixed precision" in
schedule-format.md; the unit stays DTYPE = f32), compute runs in P:
  cast-on-gather (default)   f32 param shard -> nn.cast P -> all_gather (P);
                             features cast to P; linear, cross-entropy and
                             backward in P; flattened grad (P) -> nn.cast
                             R -> reduce_scatter (R) -> [nn.cast f32] ->
                             AdamW on the f32 shard
  separate                   inputs `param` (P shard) and `master` (f32
                             shard): all_gather of the P param; after AdamW
                             on the master, nn.cast P gives the new param
--reduce-dtype R (default P) is the dtype of the reduce_scatter.
"""
import json
import sys

F, C, GLOBAL_BATCH = 13, 5, 12


def padded(numel, n):
    p = (numel + n - 1) // n * n
    return max(p, n)


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    n, dtype, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    sgd = "--sgd" in sys.argv
    strategy = option("--strategy", None)
    replicas = int(option("--replicas", "1"))
    assert strategy == "hybrid-shard" or replicas == 1, "--replicas is for hybrid-shard"
    assert not (sgd and strategy), "--sgd is for the default strategy"
    s_size = n // replicas
    assert replicas * s_size == n, "replicas must divide the world size"
    b = GLOBAL_BATCH // n
    assert b * n == GLOBAL_BATCH, "world size must divide the global batch"
    numel = C * F + C
    pad = padded(numel, s_size)
    shard = pad // s_size

    def buf(i, shape, cls, dt=dtype, **kw):
        size = 1
        for d in shape:
            size *= d
        es = {"f32": 4, "f64": 8, "i32": 4, "i64": 8, "bf16": 2, "f16": 2}[dt]
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
    pdt = option("--param-dtype", None)
    if pdt:
        assert not sgd and not strategy and dtype == "f32", \
            "--param-dtype is for the default strategy, AdamW and f32"
        buffers, instructions, inputs, outputs = mixed(
            pdt, option("--reduce-dtype", pdt),
            option("--master-weights", "cast-on-gather"),
            buffers, instructions, inputs, outputs, b, pad, shard)
    if strategy in ("no-shard", "shard-optimizer", "hybrid-shard"):
        buffers, instructions, inputs, outputs = restructure(
            strategy, buffers, instructions, inputs, outputs, pad, shard)
    resident_state(instructions, inputs, outputs)
    bound = (1.0 / F) ** 0.5
    sched = {
        "format": "fsdp-schedule", "version": 2, "function": "forward", "world_size": n,
        "global_batch": GLOBAL_BATCH, "optimizer": opt,
        "units": [{"name": "fc", "dtype": dtype, "numel": numel, "padded_numel": pad,
                   "shard_numel": shard, "params": [
                       {"fqn": "fc.weight", "shape": [C, F], "offset": 0, "numel": C * F,
                        "init": "uniform(%.5f)" % bound, "trainable": True},
                       {"fqn": "fc.bias", "shape": [C], "offset": C * F, "numel": C,
                        "init": "uniform(%.5f)" % bound, "trainable": True}]}],
        "buffers": buffers, "inputs": inputs, "outputs": outputs, "instructions": instructions,
    }
    if strategy:
        sched["strategy"] = strategy
        sched["grid"] = {"replicas": replicas, "shard_size": s_size}
        for i in instructions:
            if i["op"] in ("fsdp.all_gather", "fsdp.reduce_scatter"):
                i["attrs"].setdefault("group", "shard")
    with open(out, "w") as f:
        json.dump(sched, f, indent=1)
        f.write("\n")


STATE_ROLES = ("param", "master", "exp_avg", "exp_avg_sq")
# Operand -> result positions that an optimizer update writes in place.
IN_PLACE = {"nn.sgd_update": {0: 0}, "nn.adamw_update": {0: 0, 2: 1, 3: 2}}


def resident_state(instructions, inputs, outputs):
    """Schedule version 2: the state inputs live for the whole step (never in
    `frees`), and an output that an optimizer update writes over its state
    input element by element `aliases` it (as the compiler's memory plan)."""
    state = {i["role"] + "/" + i["unit"]: i["buffer"] for i in inputs
             if i["role"] in STATE_ROLES}
    for ins in instructions:
        ins["frees"] = [f for f in ins.get("frees", []) if f not in state.values()]
    for o in outputs:
        src = state.get(o["role"] + "/" + o.get("unit", ""))
        for ins in instructions:
            pairs = IN_PLACE.get(ins["op"], {})
            if o["buffer"] in ins["results"] and any(
                    ins["operands"][a] == src and ins["results"][r] == o["buffer"]
                    for a, r in pairs.items()):
                o["aliases"] = src


def mixed(pdt, rdt, master, buffers, instructions, inputs, outputs, b, pad, shard):
    """Rewrites the full-shard f32 step (buffer ids as in main) to compute in
    `pdt` and reduce in `rdt` ("Mixed precision" in schedule-format.md)."""
    es = {"f32": 4, "bf16": 2, "f16": 2}
    by_id = {x["id"]: x for x in buffers}

    def retype(i, dt):
        x = by_id[i]
        x["bytes"] = x["bytes"] // es[x["dtype"]] * es[dt]
        x["dtype"] = dt

    def new(i, shape, dt, cls):
        size = 1
        for d in shape:
            size *= d
        x = dict(id=i, dtype=dt, shape=shape, bytes=size * es[dt], **{"class": cls})
        buffers.append(x)
        by_id[i] = x

    def cast(src, dst, frees=(), line=0):
        return {"op": "nn.cast", "operands": [src], "results": [dst], "attrs": {},
                "loc": "linear.mlir:%d:5" % line, "frees": list(frees)}

    # Compute buffers in pdt: gathered param and its views, logits,
    # dlogits, weight/bias grads, flat grad. The loss (10) and dloss (11) stay
    # f32: nn.cross_entropy of 16-bit logits is f32 (torch.autocast's).
    for i in (6, 7, 8, 9, 12, 13, 14, 15):
        retype(i, pdt)
    new(21, [b, 13], pdt, "activation")  # features cast to pdt
    by_inst = {i["op"] + str(i["results"]): i for i in instructions}
    ag = by_inst["fsdp.all_gather[6]"]
    rs = by_inst["fsdp.reduce_scatter[16]"]
    adamw = by_inst["nn.adamw_update[17, 18, 19]"]
    by_inst["nn.linear[9]"]["operands"][0] = 21
    mm = by_inst["nn.matmul[13]"]
    mm["operands"][1] = 21
    mm["frees"] = [21]
    head = [cast(0, 21, frees=[0], line=20)]
    body = [i for i in instructions if i is not adamw and i is not rs and i is not ag]
    tail = []
    # Reduction: flat grad 15 (pdt) -> [cast rdt 22] -> reduce_scatter -> 16
    # (rdt) -> [cast f32 24] -> AdamW.
    grad = 15
    if rdt != pdt:
        new(22, [pad], rdt, "grad")
        tail.append(cast(15, 22, frees=[15], line=21))
        grad = 22
    rs["operands"], rs["frees"] = [grad], [grad]
    retype(16, rdt)
    tail.append(rs)
    g32 = 16
    if rdt != "f32":
        new(24, [shard], "f32", "grad_shard")
        tail.append(cast(16, 24, frees=[16], line=22))
        g32 = 24
    if master == "cast-on-gather":
        # The f32 shard 3 is the only copy: cast to pdt (20), then gather.
        new(20, [shard], pdt, "param_shard")
        head.append(cast(3, 20, line=23))
        ag["operands"], ag["frees"] = [20], [20]
        adamw["operands"][1] = g32
        adamw["frees"] = [3, g32, 4, 5, 2]
        tail.append(adamw)
    else:
        # separate: param 3 is the pdt copy, master 23 the f32 one; AdamW
        # writes the new master 25, cast to the new param 17.
        assert master == "separate", master
        retype(3, pdt)
        retype(17, pdt)
        new(23, [shard], "f32", "param_shard")
        new(25, [shard], "f32", "param_shard")
        inputs.append({"buffer": 23, "role": "master", "unit": "fc"})
        outputs.append({"buffer": 25, "role": "master", "unit": "fc"})
        ag["frees"] = [3]
        adamw["operands"] = [23, g32, 4, 5, 2]
        adamw["results"] = [25, 18, 19]
        adamw["frees"] = [23, g32, 4, 5, 2]
        tail += [adamw, cast(25, 17, line=24)]
    return buffers, head + [ag] + body + tail, inputs, outputs


def restructure(strategy, buffers, instructions, inputs, outputs, pad, shard):
    """Rewrites the full-shard step (buffer ids as in main) for `strategy`."""
    by_id = {x["id"]: x for x in buffers}

    def resize(i, n, cls):
        by_id[i].update(shape=[n], bytes=n * by_id[i]["bytes"] // by_id[i]["shape"][0],
                        **{"class": cls})

    def layout(io_list, roles):
        for io in io_list:
            if io["role"] in roles:
                io["layout"] = "full"

    head = [i for i in instructions if i["op"] not in ("fsdp.reduce_scatter", "nn.adamw_update")]
    adamw = [i for i in instructions if i["op"] == "nn.adamw_update"][0]
    rs = [i for i in instructions if i["op"] == "fsdp.reduce_scatter"][0]
    if strategy == "hybrid-shard":
        # grad shard 16 -> all_reduce over the replicas -> 22.
        buffers.append(dict(by_id[16], id=22))
        rs["attrs"]["group"] = "shard"
        ar = {"op": "fsdp.all_reduce", "operands": [16], "results": [22],
              "attrs": {"unit": "fc", "op": "avg", "group": "replicate"},
              "loc": "linear.mlir:12:9", "frees": [16]}
        adamw["operands"][1] = 22
        adamw["frees"] = [3, 22, 4, 5, 2]
        return buffers, head + [rs, ar, adamw], inputs, outputs
    # The parameter is a full input: views of it replace the gathered buffer 6.
    head = [i for i in head if i["op"] not in ("fsdp.all_gather", "fsdp.free")]
    for i in head:
        if i["op"] == "fsdp.param_view":
            i["operands"] = [3]
    by_id[7]["view_of"] = by_id[8]["view_of"] = 3
    buffers[:] = [x for x in buffers if x["id"] != 6]
    resize(3, pad, "param")
    resize(17, pad, "param")
    if strategy == "no-shard":
        for i in (16, 4, 5, 18, 19):
            resize(i, pad, "grad" if i == 16 else "opt_state")
        ar = {"op": "fsdp.all_reduce", "operands": [15], "results": [16],
              "attrs": {"unit": "fc", "op": "avg", "group": "world"},
              "loc": "linear.mlir:12:3", "frees": [15]}
        layout(inputs, ("param", "exp_avg", "exp_avg_sq"))
        layout(outputs, ("param", "exp_avg", "exp_avg_sq"))
        return buffers, head + [ar, adamw], inputs, outputs
    # shard-optimizer: local shard 20 of the param, new shard 21, gathered to 17.
    buffers += [dict(by_id[16], id=20, **{"class": "param_shard"}),
                dict(by_id[16], id=21, **{"class": "param_shard"})]
    rs["attrs"]["group"] = "shard"
    ls = {"op": "fsdp.local_shard", "operands": [3], "results": [20],
          "attrs": {"unit": "fc", "group": "shard"}, "loc": "linear.mlir:13:1", "frees": [3]}
    adamw.update(operands=[20, 16, 4, 5, 2], results=[21, 18, 19], frees=[20, 16, 4, 5, 2])
    ag = {"op": "fsdp.all_gather", "operands": [21], "results": [17],
          "attrs": {"unit": "fc", "group": "shard"}, "loc": "linear.mlir:14:1", "frees": [21]}
    layout(inputs, ("param",))
    layout(outputs, ("param",))
    return buffers, head + [rs, ls, adamw, ag], inputs, outputs


if __name__ == "__main__":
    main()
