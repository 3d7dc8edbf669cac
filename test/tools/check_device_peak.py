#!/usr/bin/env python3
"""Checks fsdp-run's allocator-measured device_peak_bytes (--alloc
per-buffer: glibc's own high-water mark, every buffer one allocation, kernel
scratch included) against the memory plan of the schedule it ran.

usage: check_device_peak.py LABEL SCHEDULE.json SUMMARY_LOG

The bound: planned <= device <= planned + 2 * R + A + 256 KiB, with planned
= memory_plan.peak_bytes_with_scratch (the schedule's buffers plus the cpu
driver's kernel scratch, fsdp/schedule/KernelScratch.h), R the largest send buffer of
a reduce-scatter and A of an all-reduce: while in flight Open MPI's libnbc
holds two temporaries of a reduce-scatter's send buffer and one of an
all-reduce's (measured: +1.6 MB for a 0.8 MB MPI_Ireduce_scatter_block,
+0.8 MB for a 0.8 MB MPI_Iallreduce), outside the plan; 256 KiB covers the
allocator's chunk overhead and the host's own bookkeeping. Prints one line
per run; exits 1 when the bound fails.
"""
import json
import sys

label, sched_path, log = sys.argv[1:4]
with open(sched_path) as f:
    sched = json.load(f)
with open(log) as f:
    summary = json.loads(f.read().strip().splitlines()[-1])
bufs = {b["id"]: b for b in sched["buffers"]}
planned = sched["memory_plan"]["peak_bytes_with_scratch"]


def largest(op):
    return max([bufs[i["operands"][0]]["bytes"] for i in sched["instructions"]
                if i["op"] == op] or [0])


device = summary["device_peak_bytes"]
upper = (planned + 2 * largest("fsdp.reduce_scatter") + largest("fsdp.all_reduce") +
         256 * 1024)
ok = summary["alloc"] == "per-buffer" and planned <= device <= upper
print("%s %s: planned %d (buffers %d + kernel scratch), device %d (%+.2f%%), "
      "bound [%d, %d]" % ("ok" if ok else "FAIL", label, planned,
                          sched["memory_plan"]["peak_bytes"], device,
                          100.0 * (device - planned) / planned, planned, upper))
sys.exit(0 if ok else 1)
