"""Checks the simulator's oversubscribed host terms (progress_yield_s,
op_call_s; Simulator.h) against counts taken from the planned MLIR itself.

usage: check-progress-yield.py PLAN.mlir YIELD_S CALL_S REPORT_WITH
       TRACE_WITH REPORT_WITHOUT TRACE_WITHOUT REPORT_CORES TRACE_CORES

The spec WITH the two keys and the one WITHOUT them put 2 ranks on 1 core
(slowdown 2); CORES is WITH on 2 cores (not oversubscribed). Independently
of the simulator's code: after every op of the step (constants aside) while
an async FSDP collective is issued and not yet waited (`fsdp.wait` of its
result), one hand-over of YIELD_S, stretched 2x; every nn.relu CALL_S more,
stretched 2x; on 2 cores no hand-over and the call cost unstretched.
"""
import json
import re
import sys

plan, y, c = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rep_w, tr_w, rep_o, tr_o, rep_c, tr_c = sys.argv[4:10]

body = open(plan).read().split("func.func", 1)[1]
in_flight, yields, relus = set(), 0, 0
for line in body.splitlines():
    m = re.match(r"\s*(?:(%[\w#:]+)(?:, %[\w#:]+)* = )?\"?([a-z_]+\.[a-z_]+)",
                 line)
    if not m or m.group(2) in ("func.return", "func.func"):
        continue
    name, result = m.group(2), m.group(1)
    if name in ("fsdp.all_gather", "fsdp.reduce_scatter", "fsdp.all_reduce") \
            and " async " in line:
        in_flight.add(result)
    w = re.match(r"\s*%[\w#]+ = fsdp\.wait (%[\w#]+)", line)
    if w:
        in_flight.discard(w.group(1))
    relus += name == "nn.relu"
    if in_flight and name != "arith.constant":
        yields += 1


def relu_seconds(trace):
    events = json.load(open(trace))["traceEvents"]
    return sum(e["dur"] * 1e-6 for e in events
               if e.get("ph") == "X" and e["name"] == "nn.relu")


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


w, o, k = (json.load(open(p)) for p in (rep_w, rep_o, rep_c))
print("yields", yields > 0, "relus", relus > 0)
print("oversubscribed: hand-overs",
      close(w.get("progress_yield_s", 0), 2 * y * yields),
      "calls", close(relu_seconds(tr_w) - relu_seconds(tr_o), 2 * c * relus),
      "longer", w["predicted_step_time_s"] > o["predicted_step_time_s"])
print("own cores: hand-overs", "progress_yield_s" not in k,
      "calls", close(relu_seconds(tr_c) - relu_seconds(tr_o) / 2, c * relus))
