#!/usr/bin/env python3
"""Checks that gradient accumulation (accumulate=sharded) holds one reduced
gradient shard per FSDP unit, however many micro-batches there are.

usage: check_accumulation_peak.py [--peak-only] REPORT_k1.json REPORT_k2.json ...

Each REPORT is fsdp-opt's planner report (report=PATH) of the same model at
the same world size and micro-batch size, with k micro-batches per step
(the global batch k times the micro-batch). Checks, for every k:
  grad_shard <= S + L,
where grad_shard is the report's max_bytes_by_class.grad_shard (the most
bytes of reduced gradient shards live at any point of the step), S the sum
of the units' shards (shard_numel x 4 bytes, f32 gradients) and L the
largest unit's shard: one running sum per unit plus the micro-batch's shard
in flight from its reduce-scatter to its add. And the per-rank peak of the
largest k exceeds that of the second largest by at most the data's growth
plus 64 KiB (the micro-batch, hence the activations, is the same). With
--peak-only only the second check (strategies whose reduced gradient is not
one f32 shard per unit: bf16 reductions cast to f32, HSDP's replicate
all-reduce, DDP's whole gradients). Prints
one line per report; exits 1 when a bound fails.
"""
import json
import sys

args = sys.argv[1:]
peak_only = args[0] == "--peak-only"
if peak_only:
    args = args[1:]
reports = [json.load(open(p)) for p in args]
ok = True
peaks = []
for path, r in zip(args, reports):
    shards = [u["shard_numel"] * 4 for u in r["units"]]
    bound = sum(shards) + max(shards)
    got = r["per_rank"]["max_bytes_by_class"]["grad_shard"]
    data = r["per_rank"]["max_bytes_by_class"]["data"]
    peaks.append((r["per_rank"]["peak_bytes"], data))
    good = got <= bound or peak_only
    ok &= good
    print("%s %s: grad_shard %d <= %d (units' shards %d + largest %d), peak %d"
          % ("ok" if good else "FAIL", path.rsplit("/", 1)[-1], got, bound,
             sum(shards), max(shards), r["per_rank"]["peak_bytes"]))
(p1, d1), (p2, d2) = peaks[-2], peaks[-1]
good = p2 <= p1 + (d2 - d1) + 64 * 1024
ok &= good
print("%s peak %d -> %d (data %+d)" % ("ok" if good else "FAIL", p1, p2,
                                       d2 - d1))
sys.exit(0 if ok else 1)
