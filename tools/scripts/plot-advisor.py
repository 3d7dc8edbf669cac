#!/usr/bin/python3
"""Plots fsdp-sweep's advisor JSON (--gpus ... --global-batch-tokens ... --json)
as one PNG of two panels:
  left:  predicted throughput (tokens/s per GPU) vs GPU count, log-log, one line
         per layout family (tensor- and pipeline-parallel degree and schedule,
         strategy / shard group size / activation-checkpoint mode, its best
         micro-batch size and bucket at each count), the ranked
         first of each count circled;
  right: a stacked memory bar per GPU count's top row: the memory plan's
         classes at the peak (GiB per rank) plus the allocator overhead
         (per_rank.allocator), with the device's memory as a line.

usage: plot-advisor.py ADVISOR.json OUT.png [--title TEXT] [--dpi 110]
Needs matplotlib (Debian's python3-matplotlib) to draw. Exit status 1 with a
message when the JSON cannot be read, is not the advisor's, or holds no
fitting layout.
"""
import argparse
import collections
import json
import sys

GIB = 1024.0**3
# The memory plan's classes (README, "The planner's report"), bottom to top.
CLASSES = ("param_shard", "opt_state", "grad", "grad_shard", "gathered_param", "comm_buffer",
           "activation", "temporary", "data", "scalar")


def family(layout):
    name = layout["strategy"]
    if name == "hybrid-shard":
        name += "/%d" % layout["shard_size"]
    if layout.get("tp", 1) > 1:
        name = "tp%d %s" % (layout["tp"], name)
    # A pipeline-parallel layout is its own family: merged with pp = 1 it
    # drew the faster of the two as one line under the pp = 1 name.
    if layout.get("pp", 1) > 1:
        name = "pp%d %s %s" % (layout["pp"], layout.get("pp_schedule", ""), name)
    return "%s, AC %s" % (name, layout["activation_checkpoint"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    ap.add_argument("--dpi", type=int, default=110)
    a = ap.parse_args()
    try:
        with open(a.json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("plot-advisor.py: cannot read %s: %s" % (a.json, e))
    if not isinstance(doc, dict) or "layouts" not in doc or "global_batch_tokens" not in doc:
        sys.exit("plot-advisor.py: %s is not fsdp-sweep's advisor JSON (--gpus ... "
                 "--global-batch-tokens ... --json)" % a.json)
    fitting = [x for x in doc["layouts"] if x.get("fits")]
    if not fitting:
        sys.exit("plot-advisor.py: %s: no layout fits" % a.json)

    # The best layout of each family at each GPU count.
    best = collections.defaultdict(dict)
    for x in fitting:
        f, n = family(x), x["gpus"]
        if n not in best[f] or x["predicted_tokens_per_s"] > best[f][n]["predicted_tokens_per_s"]:
            best[f][n] = x
    top = {x["gpus"]: x for x in fitting if x.get("rank") == 1}

    # Imported here: family() and the checks above need no matplotlib.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    for f in sorted(best):
        pts = sorted(best[f].items())
        left.plot([n for n, _ in pts], [x["predicted_tokens_per_s"] / n for n, x in pts],
                  marker="o", markersize=3, linewidth=1, label=f)
    left.scatter(list(top), [x["predicted_tokens_per_s"] / n for n, x in top.items()], s=90,
                 facecolors="none", edgecolors="black", linewidths=1.2, label="ranked first", zorder=5)
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("GPUs")
    left.set_ylabel("predicted tokens/s per GPU")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=6, ncol=2)

    counts = sorted(top)
    bottom = [0.0] * len(counts)
    for cls in CLASSES:
        vals = [top[n]["report"]["per_rank"]["peak_bytes_by_class"].get(cls, 0) / GIB for n in counts]
        if any(vals):
            right.bar([str(n) for n in counts], vals, bottom=bottom, label=cls)
            bottom = [b + v for b, v in zip(bottom, vals)]
    over = [top[n]["report"]["per_rank"].get("allocator", {}).get("overhead_bytes", 0) / GIB for n in counts]
    if any(over):
        right.bar([str(n) for n in counts], over, bottom=bottom, label="allocator overhead", hatch="//",
                  color="lightgrey")
    right.axhline(doc["memory_bytes"] / GIB, color="red", linestyle="--", linewidth=1, label="device memory")
    right.set_xticks(range(len(counts)))
    right.set_xticklabels(["%d\n%s" % (n, family(top[n]).replace(", ", "\n")) for n in counts], fontsize=6)
    right.set_ylabel("GiB per rank (ranked first)")
    right.legend(fontsize=6)
    fig.suptitle(a.title or "%s on %s, %d tokens per step" % (
        doc["model"].split("/")[-1], doc["cluster"], doc["global_batch_tokens"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=a.dpi)


if __name__ == "__main__":
    main()
