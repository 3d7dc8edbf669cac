#!/usr/bin/env python3
"""Prints where a fidelity row's planned memory goes, stage by stage: each
pipeline stage's planned peak per rank (bytes and GiB), the memory plan's
classes at that peak (per_rank.peak_bytes_by_class: gathered parameters,
gradients, activations, ...), each class's own most over the step
(max_bytes_by_class), and the micro-batches in flight at the peak with
their bytes (the report's `pipeline` object; docs/pipeline-parallel.md,
"Memory"). A row without pp prints its one plan. Each row is planned by
bench/fidelity/fidelity.py's `plan` (fsdp-import, then fsdp-opt
--fsdp-pipeline with the row's options), so the numbers are the fidelity
table's plans; `--set KEY=JSON` overrides a row key first (e.g.
`--set fused_swiglu=false` to plan a row as before a change).

usage: bench/fidelity/memory_breakdown.py ROW_ID [--set KEY=JSON ...]
                                          [--build DIR] [--rows-file PATH]
                                          [--json OUT]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402  (plan, GIB, ROOT)

CLASSES = ("gathered_param", "param_shard", "opt_state", "grad", "grad_shard",
           "comm_buffer", "activation", "temporary", "data", "scalar")


def stage_line(rep):
    """One stage's (or a plan's) peak and classes, in GiB."""
    pr = rep["per_rank"]
    at = pr.get("peak_bytes_by_class", {})
    most = pr.get("max_bytes_by_class", {})
    cls = " ".join("%s %.2f/%.2f" % (c, at.get(c, 0) / fidelity.GIB, most.get(c, 0) / fidelity.GIB)
                   for c in CLASSES if at.get(c, 0) or most.get(c, 0))
    pp = rep.get("pipeline")
    flight = ""
    if pp:
        n = len(pp["micro_batches_in_flight_at_peak"])
        mb = sum(pp["micro_batch_bytes_at_peak"])
        flight = "; in flight at the peak %d micro-batches, %.2f GiB (most at once %d)" % (
            n, mb / fidelity.GIB, pp["max_micro_batches_in_flight"])
    return "peak %d B = %.2f GiB [class at peak/most, GiB: %s]%s" % (
        pr["peak_bytes"], pr["peak_bytes"] / fidelity.GIB, cls, flight)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("row")
    ap.add_argument("--set", action="append", default=[], help="KEY=JSON: override a row key")
    ap.add_argument("--build", default=os.path.join(fidelity.ROOT, "build", "bin"))
    ap.add_argument("--rows-file", default=os.path.join(fidelity.ROOT, "bench", "fidelity", "rows.json"))
    ap.add_argument("--json", default="", help="write the report here")
    a = ap.parse_args()
    doc = json.load(open(a.rows_file))
    rows = {r["id"]: r for r in doc["rows"]}
    if a.row not in rows:
        sys.exit("memory_breakdown.py: no row '%s' in %s" % (a.row, a.rows_file))
    row = dict(rows[a.row])
    for kv in a.set:
        key, sep, value = kv.partition("=")
        if not sep:
            sys.exit("memory_breakdown.py: --set %s: expected KEY=JSON" % kv)
        try:
            row[key] = json.loads(value)
        except ValueError as e:
            sys.exit("memory_breakdown.py: --set %s: %s" % (kv, e))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            report, _ = fidelity.plan(row, doc["clusters"], a.build, tmp)
        except RuntimeError as e:
            sys.exit("memory_breakdown.py: %s" % e)
    print("%s: planned peak %.2f GiB per rank (%s)" % (
        a.row, report["per_rank"]["peak_bytes"] / fidelity.GIB,
        ", ".join(a.set) or "as in rows.json"))
    for rep in report.get("stages", []) or [report]:
        stage = rep.get("pipeline", {}).get("stage", "-")
        print("stage %s: %s" % (stage, stage_line(rep)))
    if a.json:
        json.dump(report, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
