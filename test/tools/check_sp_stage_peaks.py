#!/usr/bin/env python3
"""Checks that sequence parallelism shrinks every pipeline stage's memory.

usage: check_sp_stage_peaks.py OFF.json OFF.log ON.json ON.log

OFF and ON are fsdp-run --alloc per-buffer runs of the same model and
pipeline layout (pp x tp) with sequence-parallel=false and true: the
schedule and the run's summary (its last line). Per run and stage, the
plan holds to the allocator (check_device_peak.py's bound: buffers - state
<= the allocator's step growth <= planned - state + 512 KiB, the growth the
summary's pipeline.by_stage[s].device_step_peak_bytes, the max over the
stage's ranks); then per stage the ratios ON / OFF of the planned peak
(memory_plan.peak_bytes) and of the allocator's step peak must not exceed
BOUND[s] (0.88 for stage 0, 0.89 for the others: the bounds of
test/lit/Integration/sequence-parallel-pipeline.test, which say why).
Prints one line per check; exits 1 if any fails.
"""
import json
import sys

from check_device_peak import SLACK, plan_growth

BOUND = {0: 0.88}
DEFAULT_BOUND = 0.89


def load(sched_path, log):
    with open(sched_path) as f:
        doc = json.load(f)
    with open(log) as f:
        summary = json.loads(f.read().strip().splitlines()[-1])
    return doc, summary


failed = False


def report(ok, text):
    global failed
    failed |= not ok
    print(("ok " if ok else "FAIL ") + text)


peaks = {}
for sp, (sched_path, log) in (("false", sys.argv[1:3]), ("true", sys.argv[3:5])):
    doc, summary = load(sched_path, log)
    by_stage = summary["pipeline"]["by_stage"]
    for s, stage in enumerate(doc["stages"]):
        buffers, planned = plan_growth(stage)
        plan = stage["memory_plan"]
        device = by_stage[s]["device_step_peak_bytes"]
        report(summary["alloc"] == "per-buffer"
               and buffers <= device <= planned + SLACK,
               "stage %d sp=%s: planned growth %d (buffers %d + scratch), "
               "device growth %d, bound [%d, %d]"
               % (s, sp, planned, buffers, device, buffers, planned + SLACK))
        peaks[(sp, s)] = (plan["peak_bytes"], device)
for s in sorted({s for _, s in peaks}):
    (p0, d0), (p1, d1) = peaks[("false", s)], peaks[("true", s)]
    bound = BOUND.get(s, DEFAULT_BOUND)
    report(p1 / p0 <= bound and d1 / d0 <= bound,
           "stage %d shrinks: plan %.3f <= %.2f, allocator %.3f <= %.2f "
           "(planned %d -> %d bytes, allocator growth %d -> %d)"
           % (s, p1 / p0, bound, d1 / d0, bound, p0, p1, d0, d1))
sys.exit(1 if failed else 0)
