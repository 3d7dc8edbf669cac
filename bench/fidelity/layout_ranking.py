#!/usr/bin/env python3
"""Checks that the planner ranks published layouts as they were measured,
each layout planned exactly as its publication ran it. The rows (ids of
bench/fidelity/rows.json) must be one model on one cluster at one world size
and one global batch (sequences of `seq` tokens per optimizer step: for
fidelity.py's global_batch, micro_batch x grad_accum x world_size / (tp x
pp)), differing in their layout (strategy, tp, pp and its schedule,
sequence parallelism, activation checkpointing, micro-batch size). Each row
is planned by bench/fidelity/fidelity.py's `plan` (fsdp-import, then
fsdp-opt --fsdp-pipeline with the row's options and its cluster spec); the
predicted tokens/s per GPU are ranked (1 = fastest) and compared with the
order of the rows' measured tokens/s per GPU.

A row with `not_planned` (fidelity.py never compares its throughput: e.g.
Float8 matmuls, async TP) is ranked only where it has a `ranking_plan` (a
sentence: the stand-in planned for it and why the order still compares) and
every row of the comparison shares its `float8` and `async_tp`: the plans
are then one stand-in for all of them (bf16, vanilla TP), a line says so,
and only the order and the fastest / slowest ratio are compared.

Unlike ranking.py, which asks fsdp-sweep's advisor for its best micro-batch
of each layout family, this plans the published micro-batch and schedule of
each row, so the comparison is of the layouts the publication measured.

Prints one line per row (its layout, measured and predicted tokens/s per
GPU with their ranks, and what bounds the predicted step: the largest of
compute, exposed TP collectives, exposed FSDP/DP collectives, exposed
point-to-point and the pipeline bubble, in seconds), the fastest over the
slowest measured row's tokens/s measured and predicted, and "ranking
matches" or "ranking differs"; exit status 1 when it differs or a row
cannot be planned.

usage: bench/fidelity/layout_ranking.py ROW_ID,ROW_ID[,...] [--build DIR | --tools-on-path]
                                        [--rows-file PATH] [--jobs N]
"""
import argparse
import concurrent.futures
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402  (plan, global_batch)

SAME = ("model", "cluster", "world_size", "seq")


def layout(r):
    """The row's layout in words: strategy, tp (with SP), pp (schedule x
    micro-batches), AC, micro-batch size."""
    parts = [r.get("strategy", "full-shard")]
    if r.get("tp", 1) > 1:
        parts.append("tp %d%s" % (r["tp"], " sp" if r.get("sequence_parallel", True) else ""))
    if r.get("pp", 1) > 1:
        parts.append("pp %d %s" % (r["pp"], r["pp_schedule"]))
    parts.append("AC %s" % r["activation_checkpoint"])
    parts.append("%d x %d" % (r["micro_batch"], r["grad_accum"]))
    return ", ".join(parts)


def bound(report):
    """What bounds the predicted step: the largest of its parts (seconds)."""
    parts = {"compute": report["compute_s"], "TP comm": report.get("tp_exposed_s", 0.0),
             "FSDP/DP comm": report["exposed_comm_s"], "p2p": report.get("p2p_exposed_s", 0.0),
             "bubble": report.get("bubble_s", 0.0)}
    name = max(parts, key=parts.get)
    return "%s %.2f s" % (name, parts[name])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows")
    ap.add_argument("--build", default=os.path.join(fidelity.ROOT, "build", "bin"))
    ap.add_argument("--tools-on-path", action="store_true")
    ap.add_argument("--rows-file", default=os.path.join(fidelity.ROOT, "bench", "fidelity", "rows.json"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    a.build = fidelity.tools_dir(a, "fsdp-opt", "layout_ranking.py")
    rows, clusters = fidelity.comparison_rows(a.rows, a.rows_file, SAME, "layout_ranking.py")
    if len({fidelity.global_batch(r) for r in rows}) != 1:
        sys.exit("layout_ranking.py: the rows differ in their global batch (%s sequences): "
                 "not one layout comparison" % ", ".join(str(fidelity.global_batch(r)) for r in rows))
    for key in ("float8", "async_tp"):
        if len({r.get(key, False) for r in rows}) != 1:
            sys.exit("layout_ranking.py: the rows differ in '%s': one plan cannot stand in for both" % key)
    if len({layout(r) for r in rows}) != len(rows):
        sys.exit("layout_ranking.py: two rows have the same layout")
    for r in rows:
        if "not_planned" in r and "ranking_plan" not in r:
            sys.exit("layout_ranking.py: row '%s' is not planned and has no ranking_plan: %s" % (
                r["id"], r["not_planned"]))
    stand_in = [r for r in rows if "not_planned" in r]
    if stand_in:
        print("planned as a stand-in (%s): %s" % (", ".join(r["id"] for r in stand_in),
                                                  stand_in[0]["ranking_plan"]))
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futures = [pool.submit(fidelity.plan, r, clusters, a.build, tmp) for r in rows]
        reports = []
        for f in futures:
            try:
                reports.append(f.result()[0])
            except RuntimeError as e:
                sys.exit("layout_ranking.py: %s" % e)
    meas = {r["id"]: r["measured"]["tokens_per_s_per_gpu"] for r in rows}
    pred = {r["id"]: rep["predicted_tokens_per_s"] / r["world_size"] for r, rep in zip(rows, reports)}
    rank = lambda d, rid: 1 + sum(1 for v in d.values() if v > d[rid])
    ok = True
    for r, rep in zip(rows, reports):
        mr, pr = rank(meas, r["id"]), rank(pred, r["id"])
        ok &= mr == pr
        print("%-26s %-44s measured %8.1f tok/s/GPU (rank %d), predicted %8.1f (rank %d), bound: %s" % (
            r["id"], layout(r), meas[r["id"]], mr, pred[r["id"]], pr, bound(rep)))
    fast = max(rows, key=lambda r: meas[r["id"]])["id"]
    slow = min(rows, key=lambda r: meas[r["id"]])["id"]
    print("fastest / slowest measured row: measured x%.3f, predicted x%.3f" % (
        meas[fast] / meas[slow], pred[fast] / pred[slow]))
    print("ranking matches" if ok else "ranking differs")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
