#!/usr/bin/python3
"""Plots fidelity.py's --json output: predicted vs measured tokens/s per GPU,
log-log, one point per published row, train rows, test rows and test rows
with pipeline parallelism marked, with the
y = x line and the +-10% and +-25% bands (the issue's mean and worst bounds
as ratios, exp(0.10) and exp(0.25)).

usage: bench/fidelity/plot.py FIDELITY.json OUT.png
Needs matplotlib (Debian's python3-matplotlib).
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = json.load(open(sys.argv[1]))
    fig, ax = plt.subplots(figsize=(6, 5.5))
    lo = min(min(r["predicted_tokens_per_s_per_gpu"], r["measured_tokens_per_s_per_gpu"]) for r in rows) / 1.5
    hi = max(max(r["predicted_tokens_per_s_per_gpu"], r["measured_tokens_per_s_per_gpu"]) for r in rows) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    for bound, style in ((0.10, ":"), (0.25, "--")):
        for sign in (1, -1):
            f = math.exp(sign * bound)
            ax.plot([lo, hi], [lo * f, hi * f], color="grey", linestyle=style, linewidth=0.7)
    # Test rows with pipeline parallelism (pp > 1; older JSON has no "pp")
    # get their own marker: the planner runs them with 1F1B where some ran
    # interleaved (bench/README.md, "Megatron-LM and Llama 3").
    groups = (("train", "o", "tab:blue", lambda r: r["split"] == "train"),
              ("test", "s", "tab:red", lambda r: r["split"] == "test" and r.get("pp", 1) == 1),
              ("test, pp > 1", "^", "tab:green", lambda r: r["split"] == "test" and r.get("pp", 1) > 1))
    for split, marker, color, member in groups:
        pts = [r for r in rows if member(r)]
        if not pts:
            continue
        logs = [abs(math.log(r["ratio"])) for r in pts]
        ax.scatter([r["measured_tokens_per_s_per_gpu"] for r in pts],
                   [r["predicted_tokens_per_s_per_gpu"] for r in pts], marker=marker, color=color,
                   s=22, label="%s (%d rows): mean |ln| %.3f, worst %.3f" % (
                       split, len(pts), sum(logs) / len(logs), max(logs)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured tokens/s per GPU (published)")
    ax.set_ylabel("predicted tokens/s per GPU (fsdp-opt)")
    ax.set_title("bench/fidelity: predicted vs measured (lines: x1, x1.105 dotted, x1.284 dashed)",
                 fontsize=8)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=80)


if __name__ == "__main__":
    main()
