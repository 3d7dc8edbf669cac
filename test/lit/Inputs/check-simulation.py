"""Checks the simulator's keys in a report against the hand computation in
test/lit/Simulator/simulate.test (relative error 1e-9)."""
import json
import sys

r = json.load(open(sys.argv[1]))
step, compute = 2.600000632, 848e-9
want = {"predicted_step_time_s": step, "compute_s": compute, "comm_s": 2.6,
        "lower_bound_s": 2.6, "exposed_comm_s": step - compute, "mfu": 500 / (step * 1e9)}
bad = [(k, r[k], v) for k, v in want.items() if abs(r[k] - v) > 1e-9 * abs(v)]
if bad or r["flops_per_rank"] != 500:
    sys.exit(f"mismatch: {bad} flops {r['flops_per_rank']}")
print("ok")
