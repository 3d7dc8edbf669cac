"""Prints the memory terms of planner reports (fsdp-opt report=...), one line
per report, for test/lit/Transforms/memory-plan-framework.test: the
framework's terms at its peak, where the peak is, and whether the report's
totals add up (the framework's peak = its classes + its terms; the allocator's
reserved bytes = that peak + the stream pools + the workspaces, the pools
holding the gradient-shard pool).

usage: check-framework-memory.py REPORT.json..."""
import json
import sys

for path in sys.argv[1:]:
    p = json.load(open(path))["per_rank"]
    a = p["allocator"]
    f = p.get("framework")
    if f is None:
        print("fsdp-run: no framework, reserved = peak + pools + workspace: %s, "
              "grad_shard_pool in allocator: %s" % (
                  a["reserved_bytes"] == p["peak_bytes"] + a["stream_pool_bytes"] + a["workspace_bytes"],
                  "grad_shard_pool_bytes" in a))
        continue
    t = f["terms_at_peak"]
    print("%s loss %s: eager_cross_entropy %d sac_cache %d grad_shard_pool %d at %s; "
          "peak = classes + terms: %s, above the plan's: %s, reserved = peak + pools + workspace: %s, "
          "pools hold the gradient shards: %s" % (
              f["memory"], f["loss"], t["eager_cross_entropy"], t["sac_cache"],
              f["grad_shard_pool_bytes"], f["peak_at"].split("'")[1],
              f["peak_bytes"] == sum(f["peak_bytes_by_class"].values()) + t["eager_cross_entropy"] + t["sac_cache"],
              f["peak_bytes"] >= p["peak_bytes"],
              a["reserved_bytes"] == f["peak_bytes"] + a["stream_pool_bytes"] + a["workspace_bytes"],
              a["grad_shard_pool_bytes"] == f["grad_shard_pool_bytes"] and a["stream_pool_bytes"] >= f["grad_shard_pool_bytes"]))
