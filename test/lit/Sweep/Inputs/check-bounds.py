"""Checks the advisor's lower bounds (include/fsdp/Sweep/AdvisorBounds.h)
against every plan it ran, for test/lit/Sweep/advisor-bounds.test.

  check-bounds.py ADVISOR.json

ADVISOR.json is fsdp-sweep's advisor JSON with --prune=false (every layout
planned). For each plan (a layout's and each screen) the family's
device-bytes bound must not exceed the plan's device bytes, and the step
bound, recomputed here from the per-sequence compute bound for the plan's own
micro-batches (k · C with one stage; C / (1 - (1 - 1/k)^P) with P stages, C
one micro-batch through every stage per TP rank), must not exceed its
predicted step. A full-AC layout's step bound (with recomputation) is checked
against its own plan. Prints the counts and the tightest ratios; exit
status 1 naming the first plan that breaks a bound.
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
c = doc["bound_compute_s_per_sequence"]
if c <= 0:
    sys.exit("check-bounds.py: no compute bound in the JSON")


def step_bound(t, pp, s, k):
    one = c * s / k / t
    return k * one if pp <= 1 else one / (1 - (1 - 1 / k) ** pp)


plans = steps = 0
tightest_bytes = tightest_step = 0.0
for x in doc["layouts"]:
    if not x["strategy"]:
        continue
    name = "%d GPUs tp %d pp %d %s/%d %s" % (x["gpus"], x["tp"], x["pp"], x["strategy"],
                                              x["shard_size"], x["activation_checkpoint"])
    runs = list(x["screens"])
    if x["fits"]:
        runs.append({"global_batch": x["micro_batch_size"] * x["micro_batches"] * x["data_parallel"],
                     "micro_batches": x["micro_batches"], "device_bytes": x["device_bytes"],
                     "predicted_step_time_s": x["predicted_step_time_s"]})
        if x["step_lower_bound_s"] > x["predicted_step_time_s"]:
            sys.exit("check-bounds.py: %s: step bound %g s > its step %g s" % (
                name, x["step_lower_bound_s"], x["predicted_step_time_s"]))
    for p in runs:
        if "device_bytes" not in p:
            continue
        plans += 1
        if x["device_bytes_lower_bound"] > p["device_bytes"]:
            sys.exit("check-bounds.py: %s: bytes bound %d > %d planned" % (
                name, x["device_bytes_lower_bound"], p["device_bytes"]))
        tightest_bytes = max(tightest_bytes, x["device_bytes_lower_bound"] / p["device_bytes"])
        s = p["global_batch"] // x["data_parallel"]
        bound = step_bound(x["tp"], x["pp"], s, p["micro_batches"])
        if bound > p["predicted_step_time_s"]:
            sys.exit("check-bounds.py: %s: step bound %g s > %g s at k = %d" % (
                name, bound, p["predicted_step_time_s"], p["micro_batches"]))
        steps += 1
        tightest_step = max(tightest_step, bound / p["predicted_step_time_s"])
print("bounds hold: %d plans; tightest bytes %.2f, step %.2f" % (plans, tightest_bytes, tightest_step))
