#!/usr/bin/env python3
"""Checks fsdp-run's measured peak and collective bytes against the plan.

Usage: check_plan.py SCHEDULE.json RUN_LOG
The schedule's memory_plan.peak_bytes must equal the summary's peak_bytes and
comm_plan.bytes_per_step the summary's comm_bytes, exactly. Exit 1 otherwise.
"""
import json
import sys

with open(sys.argv[1]) as f:
    schedule = json.load(f)
with open(sys.argv[2]) as f:
    summary = json.loads([l for l in f.read().splitlines() if l.strip()][-1])
planned_peak = schedule["memory_plan"]["peak_bytes"]
planned_comm = schedule["comm_plan"]["bytes_per_step"]
ok = planned_peak == summary["peak_bytes"] and planned_comm == summary["comm_bytes"]
print(f"world size {summary['world_size']}: planned peak {planned_peak} {'=' if planned_peak == summary['peak_bytes'] else '!= ' + str(summary['peak_bytes'])} measured; "
      f"planned comm {planned_comm} {'=' if planned_comm == summary['comm_bytes'] else '!= ' + str(summary['comm_bytes'])} measured")
sys.exit(0 if ok else 1)
