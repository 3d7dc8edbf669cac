#!/usr/bin/env python3
"""Checks that fsdp-sweep's advisor ranks published layouts as they were
measured. The rows (ids of bench/fidelity/rows.json) must be one model on one
cluster at one world size with one batch per data-parallel rank (micro_batch
x grad_accum sequences of `seq` tokens), differing only in what the advisor
varies (the activation-checkpoint mode; the strategy where rows give one,
default full-shard; the tensor-parallel degree `tp`, default 1, whose T ranks
share their sequences: global batch B = micro_batch x grad_accum x
world_size / tp). The advisor is run on exactly those layouts, once per
global batch:

  fsdp-sweep MODEL --cluster SPEC --seq T --gpus W --global-batch-tokens B*T
             --strategies S --activation-checkpoint <the rows' modes>
             [--tp <the rows' degrees>, when a row has tp]
             --pipeline "reduce-dtype=R prefetch=fsdp2|fsdp1"

and its ranks (1 = fastest) are compared with the order of the rows'
measured tokens/s per GPU. Prints one line per row (measured, predicted,
measured rank, advised rank), the fastest over the slowest measured row's
tokens/s measured and advised, and "ranking matches" or "ranking differs";
exit status 1 when it differs or a row cannot be advised.

usage: bench/fidelity/ranking.py ROW_ID,ROW_ID[,...] [--build DIR | --tools-on-path]
                                 [--rows-file PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402 (row_spec: the spec a row runs on)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAME = ("model", "cluster", "world_size", "seq", "micro_batch", "grad_accum", "stack", "precision",
        "compile")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--tools-on-path", action="store_true")
    ap.add_argument("--rows-file", default=os.path.join(ROOT, "bench", "fidelity", "rows.json"))
    a = ap.parse_args()
    a.build = fidelity.tools_dir(a, "fsdp-sweep", "ranking.py")
    rows, clusters = fidelity.comparison_rows(a.rows, a.rows_file, SAME, "ranking.py")
    layout = lambda r: (r.get("strategy", "full-shard"), r["activation_checkpoint"], r.get("tp", 1))
    layouts = [layout(r) for r in rows]
    if len(set(layouts)) != len(layouts):
        sys.exit("ranking.py: two rows have the same layout %s" % (layouts[0],))
    r0 = rows[0]
    config = json.load(open(os.path.join(ROOT, r0["model"])))
    batch_of = lambda r: r["micro_batch"] * r["grad_accum"] * r["world_size"] // r.get("tp", 1)
    advised = {}  # layout -> the advisor's entry, from one run per global batch
    with tempfile.TemporaryDirectory() as tmp:
        if config.get("model_type") == "gpt2":  # as fidelity.py: MPT's max_seq_len
            config["n_positions"] = r0["seq"]
        cfg = os.path.join(tmp, "config.json")
        json.dump(config, open(cfg, "w"))
        for batch in sorted({batch_of(r) for r in rows}):
            group = [layout(r) for r in rows if batch_of(r) == batch]
            out = os.path.join(tmp, "advisor-%d.json" % batch)
            cmd = [os.path.join(a.build, "fsdp-sweep"), cfg,
                   "--cluster", fidelity.row_spec(r0, clusters, tmp, config),
                   "--seq", str(r0["seq"]), "--gpus", str(r0["world_size"]),
                   "--global-batch-tokens", str(batch * r0["seq"]),
                   "--strategies", ",".join(sorted({s for s, _, _ in group})),
                   "--activation-checkpoint", ",".join(sorted({m for _, m, _ in group})),
                   "--param-dtype", r0["precision"]["param"],
                   "--pipeline", "reduce-dtype=%s prefetch=%s" % (
                       r0["precision"]["reduce"], "fsdp2" if "FSDP2" in r0["stack"] else "fsdp1"),
                   "--top", "10", "--json", out]
            if any("tp" in r for r in rows):
                cmd += ["--tp", ",".join(str(t) for t in sorted({t for _, _, t in group}))]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("ranking.py: fsdp-sweep failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
            for l in json.load(open(out))["layouts"]:
                key = (l["strategy"], l["activation_checkpoint"], l.get("tp", 1))
                if key in group:
                    advised.setdefault(key, []).append(l)
    measured = sorted(rows, key=lambda r: -r["measured"]["tokens_per_s_per_gpu"])
    ok = True
    predicted = []
    # The advisor's prediction per GPU (its global batches differ with tp).
    per_gpu = lambda l: l["predicted_tokens_per_s"] / l["gpus"]
    for r in rows:
        s, m, t = layout(r)
        x = advised.get(layout(r), [])
        if len(x) != 1 or not x[0]["fits"]:
            sys.exit("ranking.py: row '%s': the advisor has no fitting layout %s, AC %s, tp %d: %s" % (
                r["id"], s, m, t, x[0].get("why", "") if x else "not planned"))
        x = x[0]
        # The advisor's rank among these rows' layouts only.
        faster = sum(1 for o in rows if o is not r and any(
            l["fits"] and per_gpu(l) > per_gpu(x) for l in advised.get(layout(o), [])))
        predicted.append((r, per_gpu(x)))
        mrank = measured.index(r) + 1
        ok &= mrank == faster + 1
        print("%-24s %-10s AC %-12s%s measured %7.0f tok/s/GPU (rank %d), advised %7.0f (rank %d, %d x %d)" % (
            r["id"], s, m, " tp %d" % t if "tp" in r else "", r["measured"]["tokens_per_s_per_gpu"], mrank,
            per_gpu(x), faster + 1, x["micro_batch_size"], x["micro_batches"]))
    # How far apart the layouts are: the fastest over the slowest row's
    # tokens/s per GPU, measured and advised.
    pred = {r["id"]: p for r, p in predicted}
    fast, slow = measured[0], measured[-1]
    print("fastest / slowest measured row: measured x%.3f, advised x%.3f" % (
        fast["measured"]["tokens_per_s_per_gpu"] / slow["measured"]["tokens_per_s_per_gpu"],
        pred[fast["id"]] / pred[slow["id"]]))
    print("ranking matches" if ok else "ranking differs")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
