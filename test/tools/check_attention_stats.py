#!/usr/bin/env python3
"""Checks attention's statistics in a schedule (fsdp-translate --fsdp-to-schedule).

Usage: check_attention_stats.py SCHEDULE.json B HQ T

Every nn.attention has two results: the output and the statistics (the row
log-sum-exp), an f32 buffer [B, HQ, T] (f64 when the output is f64) placed in
the memory plan's arena (an arena_offset); every nn.attention_grad reads, as
operands 3 and 4, the output and the statistics of one nn.attention before it
(the forward's, or the recomputation's under activation checkpointing).
Prints the counts; exits 1 naming the first violation. Standard library only.
"""
import json
import sys


def main():
    path, b, hq, t = sys.argv[1], *map(int, sys.argv[2:5])
    with open(path) as f:
        s = json.load(f)
    bufs = {x["id"]: x for x in s["buffers"]}
    produced = {}  # buffer id -> (instruction index, result index)
    fwd = bwd = 0
    for i, ins in enumerate(s["instructions"]):
        op = ins["op"]
        if op == "nn.attention":
            fwd += 1
            if len(ins["results"]) != 2:
                sys.exit(f"instruction #{i}: nn.attention has {len(ins['results'])} results, expected 2")
            out, lse = (bufs[r] for r in ins["results"])
            want = "f64" if out["dtype"] == "f64" else "f32"
            if lse["dtype"] != want or lse["shape"] != [b, hq, t]:
                sys.exit(f"instruction #{i}: statistics {lse['dtype']} {lse['shape']}, expected {want} {[b, hq, t]}")
            if lse.get("arena_offset", -1) < 0:
                sys.exit(f"instruction #{i}: statistics buffer {lse['id']} has no arena_offset")
            produced[ins["results"][0]] = (i, 0)
            produced[ins["results"][1]] = (i, 1)
        elif op == "nn.attention_grad":
            bwd += 1
            o, lse = ins["operands"][3], ins["operands"][4]
            if o not in produced or lse not in produced:
                sys.exit(f"instruction #{i}: nn.attention_grad reads buffers {o}, {lse} that no earlier nn.attention wrote")
            (io, ro), (il, rl) = produced[o], produced[lse]
            if io != il or (ro, rl) != (0, 1):
                sys.exit(f"instruction #{i}: nn.attention_grad reads output {o} and statistics {lse} of different attentions")
    if not fwd or not bwd:
        sys.exit(f"no attention: {fwd} forward, {bwd} backward")
    print(f"attention statistics: {fwd} forward, {bwd} backward, planned")


if __name__ == "__main__":
    main()
