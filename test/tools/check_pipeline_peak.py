#!/usr/bin/env python3
"""Checks a pipeline stage's planned memory against the allocator's own
measure, and how the first stage's measured peak grows with the pipeline
depth P and the micro-batch count m under GPipe and 1F1B.

usage: check_pipeline_peak.py P:SCHEDULE:m:SCHEDULE.json:SUMMARY_LOG ...

Each run is fsdp-run --alloc per-buffer of a pipeline schedule at dp = 1
with the same micro-batch size and the same first stage (the embeddings and
layer 0) whatever P and m. Per run and stage:
- the plan's micro-batches in flight (the schedule's
  pipeline_memory.max_micro_batches_in_flight) are GPipe's m and 1F1B's min(P - s, m)
  on stage s (Narayanan et al., SC'21, Sec. 2.2; Korthikanti et al. 2022,
  Sec. 4.3: the first stage holds P micro-batches under 1F1B);
- the allocator's growth over the start of the steps on that stage
  (pipeline.by_stage[s].device_step_peak_bytes, max over the stage's ranks)
  lies within check_device_peak.py's bound of the stage's plan:
  buffers - state <= device growth <= planned - state + 512 KiB.
On the first stage, by the allocator's numbers alone, with A the growth of
GPipe's peak from m = 4 to 8 at P = 4 divided by the 4 micro-batches
(the measured bytes of one micro-batch in flight):
- GPipe grows with m: from m = 4 to 8 at P = 2 by 4 A (within +-25 %);
- GPipe does not grow with P: P = 2 and 4 at m = 4 and 8 within A / 2;
- 1F1B does not grow with m: P = 2 at m = 4 and 8, P = 4 at m = 8 and 16,
  within A / 2 (at m = P = 4 no backward runs before the last forward, so
  the peak there is another instruction's, without the whole gradients
  accumulated by then);
- 1F1B grows with P: from P = 2 to 4 at m = 8 by 2 A (the P - 2 more
  micro-batches in flight; within +-25 %).
On the later stages s >= 1 under 1F1B, with G the bytes of one input
gradient the stage sends back (its largest fsdp.send operand to stage
s - 1): neither the plan nor the allocator grows with m (P = 2 at m = 4
and 8, P = 4 at m = 8 and 16): the planned peak by less than G, the
allocator's growth by at most (m1 - m0) G / 2. Each sent gradient is waited
before the next activation from s - 1 (fsdp-pipeline-p2p); waited at the
step's end, the m0..m1 extra gradients stayed live and both grew by
(m1 - m0) G.
Prints one line per check; exits 1 if any fails.
"""
import json
import sys

from check_device_peak import SLACK, plan_growth

failed = False


def report(ok, text):
    global failed
    failed |= not ok
    print(("ok " if ok else "FAIL ") + text)


runs = {}
later = {}  # (P, schedule, m, stage) -> (planned peak, device growth, G)
for arg in sys.argv[1:]:
    p, sched, m, sched_path, log = arg.split(":")
    p, m = int(p), int(m)
    with open(sched_path) as f:
        doc = json.load(f)
    with open(log) as f:
        summary = json.loads(f.read().strip().splitlines()[-1])
    by_stage = summary["pipeline"]["by_stage"]
    if summary["alloc"] != "per-buffer" or len(by_stage) != p:
        report(False, "%s: not a per-buffer run of %d stages" % (arg, p))
        continue
    for s, stage in enumerate(doc["stages"]):
        label = "P=%d %s m=%d stage %d" % (p, sched, m, s)
        want = m if sched == "gpipe" else min(p - s, m)
        got = stage["pipeline_memory"]["max_micro_batches_in_flight"]
        buffers, planned = plan_growth(stage)
        plan = stage["memory_plan"]
        device = by_stage[s]["device_step_peak_bytes"]
        ok = (got == want and buffers <= device <= planned + SLACK
              and by_stage[s]["planned_peak_bytes"] == plan["peak_bytes"])
        report(ok, "%s: %d micro-batches in flight (expected %d), planned "
               "growth %d (buffers %d + scratch), device growth %d (%+.1f%%)"
               % (label, got, want, planned, buffers, device,
                  100.0 * (device - planned) / plan["peak_bytes_with_scratch"]))
        sizes = {b["id"]: b["bytes"] for b in stage["buffers"]}
        sent_back = [sizes[i["operands"][0]]
                     for i in stage["instructions"]
                     if i["op"] == "fsdp.send" and i["attrs"]["peer"] == s - 1]
        later[(p, sched, m, s)] = (plan["peak_bytes"], device,
                                   max(sent_back, default=0))
    runs[(p, sched, m)] = by_stage[0]["device_step_peak_bytes"]

D = runs.get
need = [(4, "gpipe", 4), (4, "gpipe", 8), (2, "gpipe", 4), (2, "gpipe", 8),
        (2, "1f1b", 4), (2, "1f1b", 8), (4, "1f1b", 8), (4, "1f1b", 16)]
if any(k not in runs for k in need):
    report(False, "trends: missing runs %s" % [k for k in need if k not in runs])
    sys.exit(1)
A = (D((4, "gpipe", 8)) - D((4, "gpipe", 4))) / 4
print("one micro-batch in flight on stage 0: A = %d bytes (allocator)" % A)


def near(delta, k):
    """delta is k A within 25 % (no growth: within A / 2, the allocator's
    noise on these 2.4-5 MB peaks being up to 2 % of them)."""
    return abs(delta - k * A) <= (0.25 * k if k else 0.5) * A


d = D((2, "gpipe", 8)) - D((2, "gpipe", 4))
report(A > 0 and near(d, 4), "gpipe grows with m: P=2 m=4 -> 8: %+d bytes = "
       "%.2f A (expected 4 A)" % (d, d / A))
for m in (4, 8):
    d = D((4, "gpipe", m)) - D((2, "gpipe", m))
    report(near(d, 0), "gpipe does not grow with P: m=%d P=2 -> 4: %+d bytes "
           "= %.2f A" % (m, d, d / A))
for p, m0, m1 in ((2, 4, 8), (4, 8, 16)):
    d = D((p, "1f1b", m1)) - D((p, "1f1b", m0))
    report(near(d, 0), "1f1b does not grow with m: P=%d m=%d -> %d: %+d bytes "
           "= %.2f A" % (p, m0, m1, d, d / A))
d = D((4, "1f1b", 8)) - D((2, "1f1b", 8))
report(near(d, 2), "1f1b grows with P: m=8 P=2 -> 4: %+d bytes = %.2f A "
       "(expected 2 A)" % (d, d / A))
for p, m0, m1 in ((2, 4, 8), (4, 8, 16)):
    for s in range(1, p):
        (plan0, dev0, g), (plan1, dev1, _) = (later[(p, "1f1b", m0, s)],
                                              later[(p, "1f1b", m1, s)])
        report(g > 0 and plan1 - plan0 < g and dev1 - dev0 <= (m1 - m0) * g / 2,
               "1f1b stage %d does not grow with m: P=%d m=%d -> %d: planned "
               "%+d bytes (< G = %d), allocator %+d bytes (<= %d)"
               % (s, p, m0, m1, plan1 - plan0, g, dev1 - dev0,
                  (m1 - m0) * g // 2))
sys.exit(1 if failed else 0)
