"""Checks of fsdp-sweep's advisor JSON (--gpus ... --global-batch-tokens ...),
for test/lit/Sweep/advisor.test. Each check recomputes what the advisor
claims from something else: the ranks from the reports' own throughput, the
top layouts from fsdp-opt's report for the same options, the memory bound
from fsdp-opt's plan of the next larger micro-batch.

  check-advisor.py ADVISOR.json CONFIG.json SPEC.json TMPDIR
prints, per GPU count, "N: ranked R, first <strategy> <AC> m x k" and a line
per check; exit status 1 naming the first layout that disagrees.
"""
import json
import os
import subprocess
import sys

doc, config, spec_path, tmp = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
memory = json.load(open(spec_path))["memory_bytes"]
seq = doc["seq"]


def fail(msg):
    sys.exit("check-advisor.py: " + msg)


def plan(pipeline, batch, name):
    """fsdp-import + fsdp-opt with the advisor's pipeline string; the report."""
    model, report = os.path.join(tmp, name + ".mlir"), os.path.join(tmp, name + ".json")
    subprocess.run(["fsdp-import", config, "--seq", str(seq), "--batch", str(batch), "-o", model],
                   check=True)
    subprocess.run(["fsdp-opt", model, "-o", os.devnull,
                    "--fsdp-pipeline=" + pipeline + " report=" + report], check=True)
    return json.load(open(report))


def reserved(report):
    return report["per_rank"]["allocator"]["reserved_bytes"]


checked_same = checked_bound = 0
for n in doc["gpus"]:
    here = [x for x in doc["layouts"] if x["gpus"] == n]
    ranked = sorted((x for x in here if x["fits"]), key=lambda x: x["rank"])
    if [x["rank"] for x in ranked] != list(range(1, len(ranked) + 1)):
        fail("%d GPUs: ranks are not 1..%d" % (n, len(ranked)))
    for a, b in zip(ranked, ranked[1:]):
        if a["predicted_tokens_per_s"] < b["predicted_tokens_per_s"]:
            fail("%d GPUs: rank %d is slower than rank %d" % (n, a["rank"], b["rank"]))
        ratio = b["predicted_step_time_s"] / a["predicted_step_time_s"]
        if abs(a["runner_up_ratio"] - ratio) > 1e-9 * ratio:
            fail("%d GPUs: rank %d's runner-up ratio %g, the reports give %g" % (
                n, a["rank"], a["runner_up_ratio"], ratio))
    for x in ranked:
        if x["device_bytes"] > memory or x["device_bytes"] != reserved(x["report"]):
            fail("%d GPUs: rank %d does not fit or its bytes are not its report's" % (n, x["rank"]))
        if x["sequences_per_rank"] != x["micro_batch_size"] * x["micro_batches"] or \
                x["sequences_per_rank"] * x["data_parallel"] * seq != doc["global_batch_tokens"]:
            fail("%d GPUs: rank %d does not keep the global batch" % (n, x["rank"]))
    if not ranked:
        print("%d: ranked 0 (%s)" % (n, here[0].get("why", "")))
        continue
    first = ranked[0]
    print("%d: ranked %d, first %s %s %d x %d" % (n, len(ranked), first["strategy"],
                                                 first["activation_checkpoint"],
                                                 first["micro_batch_size"], first["micro_batches"]))
    # The first layout's report is fsdp-opt's for the same options.
    report = plan(first["pipeline"], doc["global_batch"], "first-%d" % n)
    if report["predicted_step_time_s"] != first["predicted_step_time_s"] or \
            reserved(report) != first["device_bytes"]:
        fail("%d GPUs: fsdp-opt predicts %r s, %d bytes for the first layout; the advisor %r s, %d" % (
            n, report["predicted_step_time_s"], reserved(report), first["predicted_step_time_s"],
            first["device_bytes"]))
    checked_same += 1
    # Memory-limited by the micro-batch: twice the micro-batch does not fit.
    for x in ranked:
        if x["micro_batches"] > 1 and x["memory_limited"]:
            k2 = x["micro_batches"] // 2
            opts = x["pipeline"].replace("micro-batches=%d" % x["micro_batches"],
                                         "micro-batches=%d" % k2)
            if k2 == 1:
                opts = opts.replace(" micro-batches=1 accumulate=sharded", "")
            r2 = plan(opts, doc["global_batch"], "double-%d-%d" % (n, x["rank"]))
            if reserved(r2) <= memory:
                fail("%d GPUs: rank %d takes %d micro-batches but %d fit (%d bytes)" % (
                    n, x["rank"], x["micro_batches"], k2, reserved(r2)))
            checked_bound += 1
            break
print("same as fsdp-opt: %d first layouts; twice the micro-batch does not fit: %d layouts" % (
    checked_same, checked_bound))
