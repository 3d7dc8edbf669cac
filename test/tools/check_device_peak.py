#!/usr/bin/env python3
"""Checks fsdp-run's allocator-measured peak (--alloc per-buffer: glibc's own
high-water mark, every buffer one allocation, kernel scratch and MPI's
temporaries included) against the memory plan of the schedule it ran.

usage: check_device_peak.py LABEL SCHEDULE.json SUMMARY_LOG

Both sides are counted from the start of the steps: the device's growth is
the summary's device_step_peak_bytes (the allocator's high-water mark during
the steps less its bytes in use when they began: the resident state and the
host's own memory, the interpreter's step plan included); the plan's growth
is its peak less the state (the inputs of role param, master, exp_avg and
exp_avg_sq, resident across steps). The bound:

  buffers - state <= device growth <= planned - state + 512 KiB

with buffers = memory_plan.peak_bytes (the schedule's buffers) and planned =
memory_plan.peak_bytes_with_scratch (the buffers plus the cpu driver's
scratch, fsdp/schedule/KernelScratch.h: its kernels' working memory, and the
temporaries Open MPI's libnbc holds while a reduce-scatter (two of its send
buffer) or an all-reduce (one) is in flight, counted until its wait). That
count is an upper bound (a progress test may complete a collective before
its wait), hence the lower bound on the buffers alone. 512 KiB covers the
allocator's chunk headers, the data staged per step and MPI's own
bookkeeping (measured: at most +0.24 MB over the plan, on the main job's
GPT-2 and a 3.2M-parameter Llama, 1 and 4 ranks, every strategy, f32, bf16,
activation checkpointing and micro-batches). Prints one line per run; exits
1 when the bound fails.
"""
import json
import sys

# The allocator's chunk headers, staged data and MPI's bookkeeping (above).
SLACK = 512 * 1024
STATE_ROLES = ("param", "master", "exp_avg", "exp_avg_sq")


def plan_growth(program):
    """(buffers, planned): a schedule's (or a pipeline stage's) planned peak
    without and with scratch, in bytes, less its resident state (the inputs
    of STATE_ROLES), the bound's two ends (above)."""
    bufs = {b["id"]: b for b in program["buffers"]}
    state = sum(bufs[i["buffer"]]["bytes"] for i in program["inputs"]
                if i["role"] in STATE_ROLES)
    plan = program["memory_plan"]
    return plan["peak_bytes"] - state, plan["peak_bytes_with_scratch"] - state


def main():
    label, sched_path, log = sys.argv[1:4]
    with open(sched_path) as f:
        sched = json.load(f)
    with open(log) as f:
        summary = json.loads(f.read().strip().splitlines()[-1])
    buffers, planned = plan_growth(sched)
    device = summary["device_step_peak_bytes"]
    upper = planned + SLACK
    ok = summary["alloc"] == "per-buffer" and buffers <= device <= upper
    print("%s %s: planned growth %d (buffers %d + scratch), device growth %d "
          "(%+d bytes, %+.2f%% of the planned peak), bound [%d, %d]"
          % ("ok" if ok else "FAIL", label, planned, buffers, device,
             device - planned,
             100.0 * (device - planned) / sched["memory_plan"]["peak_bytes_with_scratch"],
             buffers, upper))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
