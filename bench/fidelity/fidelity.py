#!/usr/bin/env python3
"""Plans every published run of bench/fidelity/rows.json with fsdp-import and
fsdp-opt (cluster=SPEC report=...) and prints predicted vs measured throughput
(tokens/s per GPU), the mean and worst |ln(predicted/measured)| over the train
rows, the test rows and all rows, and the memory verdicts per row: the planned
peak per rank, the peak of the stack that ran the row (per_rank.framework),
the planner's reserved bytes (that peak + the spec's allocator overhead,
per_rank.allocator in the report: per-stream pools and workspaces)
against the published memory where a row gives one ("ok" within 15%, else
"OFF"), and whether the reserved bytes fit the spec's memory_bytes (every
published run did fit).

Each row is planned as its publication ran it: global batch = micro_batch x
grad_accum x world_size / (tp x pp) sequences of `seq` tokens (tp, pp: a
row's tensor- and pipeline-parallel degrees, default 1), `micro-batches=grad_accum
accumulate=A` (A: the row's `accumulate`, default sharded: FSDP reduce-scatters
every micro-batch; `unsharded` for DDP's one all-reduce per step), the row's
`strategy` (default full-shard), one FSDP unit
per transformer block (`policy=block`), the row's parameter and reduce
dtypes, the row's activation checkpointing, prefetch `fsdp2` for torchtitan
(FSDP2: torchtitan, KempnerForge) and `fsdp1` for Composer (FSDP1), or the
row's `prefetch`. Tensor parallelism: `tp=T`, with `sequence-parallel=` the
row's `sequence_parallel` where it has one; without sequence parallelism the
stages' activations cross scatter/gathered over the tp group (pp-scatter-gather's
default, as the rows' Megatron-LM and DeepSpeed stacks ran). Pipeline parallelism (pp > 1):
`pp=P pp-schedule=S micro-batches=grad_accum` (grad_accum is then the
pipeline's micro-batches per step), S the row's `pp_schedule` (`pp-chunks=`
the row's `pp_chunks` under interleaved-1f1b; `pp-split-embedding=true` and
`pp-split-loss=true` where the row's `pp_split_ends` is true: its embedding and
its head and loss each counted as a layer of the split; `pp-split=` the row's
`pp_split`, the stages' first layers, where the publication gives its split); a row whose publication ran
another schedule than the planner can plan says so in `published_pp_schedule`
(printed in the breakdown). Rows with tp or pp get a second table, the
step's breakdown from the report: compute (with recompute), exposed TP
collectives, exposed FSDP/DP collectives, exposed point-to-point, and the
pipeline bubble (idle seconds and fraction of the busiest stage). A GPT-2-type config (the MPT rows)
gets n_positions = seq (MPT's max_seq_len). A row with "compile": true
(torch.compile) plans with its spec's efficiency.elementwise_traffic set to 1
(row_spec); a row with "fused_kernels" (a stack whose own fused kernels run
the model's elementwise ops: "megatron-lm") with that stack's factor from
FUSED_KERNELS_TRAFFIC; the others with the spec's (PyTorch eager's unfused
kernels). A row's "attention" ("unfused": Megatron-LM's core attention, the
scores materialised) is passed as `attention=`; a row with "fused_swiglu":
true (a stack whose SwiGLU kernel keeps only [gate, up], as Megatron-LM's) as
`fused-swiglu=true`. A row with an "attention_kernel" (a kernel of
bench/fidelity/attention_kernels.json its stack ran in place of the
FlashAttention-2-class kernel the specs price: llm-foundry's Triton kernel)
plans with its spec's efficiency.attention set to that kernel's throughput on
the spec's GPU, derived from published sequence-length scans (--kernels
prints the derivation). A row with a
`collective_stack` (a profile of bench/fidelity/stacks.json: how the stack
issues and waits for its collectives, DeepSpeed ZeRO-3 v0.3's one collective per
parameter) plans with that profile as its spec's `stack`. The memory
is planned for the stack that ran the row where it was PyTorch FSDP
(`framework-memory=torch-compile` where the row compiled, else `torch-eager`;
`framework-loss=fused` for llm-foundry's fused cross-entropy): the plan plus
what PyTorch FSDP keeps beyond it; Megatron, DeepSpeed and Llama 3 rows with
our runtime's plan (`fsdp-run`). A row's `loss_dtype` ("f32": the
logits are upcast before the loss, torchtitan's pred.float()) is passed to
fsdp-import as --loss-dtype; without it the loss reads the compute dtype.

A row with `plan_deferred` (a sentence: why, e.g. the planner's time at its
micro-batch count) is left out of the default run, with a line saying so,
and planned when --rows names it. A row with `not_planned` (a sentence: what
of the run the planner cannot express, e.g. Float8 matmuls or async TP) is
recorded with its sources but never planned here: the default run prints a
line saying why, and --rows naming it is an error; layout_ranking.py may
still rank it against rows of the same kind where it has a `ranking_plan`.

usage: bench/fidelity/fidelity.py [--build DIR | --tools-on-path] [--rows ID,ID]
                                  [--json OUT] [--rows-file PATH] [--jobs N]
       bench/fidelity/fidelity.py --kernels
Exit status 1 with a message naming the row when a row cannot be planned.
"""
import argparse
import concurrent.futures
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 1024.0**3
# The bound: planned memory within 15% of the published where given.
MEMORY_TOLERANCE = 0.15


# efficiency.elementwise_traffic of a stack whose own fused kernels run the
# model's elementwise-class ops (a row's "fused_kernels"), from its kernel
# count, not from the rows (docs/compute-model.md, "Megatron-LM's kernels"):
# megatron-lm (2021-22) runs each of the plan's elementwise ops as one kernel
# that reads its inputs and writes its output once: apex's FusedLayerNorm
# forward, bias_gelu and its backward (megatron/model/fused_bias_gelu.py), the
# jit-scripted bias_dropout_add (megatron/model/transformer.py), autograd's
# one add or cat per gradient sum; the qkv split is views (0 passes), apex's
# layer-norm backward reads x and dy twice (5/3 of a pass) and the dropout
# masks add a byte per element: per GPT layer these net to 1.00 of the
# plan's single-pass bytes at tp 1 and 1.18 at tp 8 without sequence
# parallelism; 1 is taken.
FUSED_KERNELS_TRAFFIC = {"megatron-lm": 1.0}
KERNELS_FILE = os.path.join(ROOT, "bench", "fidelity", "attention_kernels.json")


def attention_flops_per_token_per_t(d_model, n_layers):
    """Causal attention FLOPs per token per unit of sequence length T,
    forward + backward: 2 d T + 5 d T per layer (include/fsdp/CostFormulas.h
    attentionFlops / attentionGradFlops over B T tokens)."""
    return 7.0 * d_model * n_layers


def scan_slope(scans):
    """The seconds per attention FLOP common to `scans` (each a model's
    d_model, n_layers and [T, tokens/s/GPU] points): least squares of the
    per-token step time 1 / throughput = a_scan + c * F * T, F the model's
    attention FLOPs per token per T, with one intercept a_scan per scan (the
    sequence-independent terms) and one c; c is 1 / the kernel's FLOP/s.
    Raises ValueError for a scan of fewer than two lengths."""
    sxy = sxx = 0.0
    for sc in scans:
        if len({t for t, _ in sc["points"]}) < 2:
            raise ValueError("scan '%s' needs two sequence lengths or more" % sc["model"])
        f = attention_flops_per_token_per_t(sc["d_model"], sc["n_layers"])
        xs = [f * t for t, _ in sc["points"]]
        ys = [1.0 / tput for _, tput in sc["points"]]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxy += sum((x - mx) * (y - my) for x, y in zip(xs, ys))
        sxx += sum((x - mx) ** 2 for x in xs)
    return sxy / sxx


@functools.lru_cache(maxsize=None)
def attention_kernels():
    """The kernels of bench/fidelity/attention_kernels.json, read once."""
    return json.load(open(KERNELS_FILE))["kernels"]


def kernel_flops(scans):
    """The kernel's attention FLOP/s fitted to `scans` (scan_slope; raises
    its ValueError)."""
    return 1.0 / scan_slope(scans)


def kernel_chip(kernel_name, spec_rel):
    """(kernel, chip entry) of attention_kernels.json whose `specs` hold the
    spec path `spec_rel`; RuntimeError when the kernel or its throughput on
    that spec's GPU is not there."""
    kernels = attention_kernels()
    if kernel_name not in kernels:
        raise RuntimeError("attention_kernel '%s' is none of %s" % (kernel_name, ", ".join(sorted(kernels))))
    kernel = kernels[kernel_name]
    for entry in kernel["chips"].values():
        if spec_rel in entry["specs"]:
            return kernel, entry
    raise RuntimeError("attention_kernel '%s' has no scan for the GPU of %s" % (kernel_name, spec_rel))


def head_dim(config):
    """The model config's attention head dimension (hidden / heads)."""
    hidden = config.get("n_embd", config.get("hidden_size"))
    heads = config.get("n_head", config.get("num_attention_heads"))
    return hidden // heads


def kernel_attention_efficiency(kernel_name, spec_rel, spec, config):
    """efficiency.attention of the kernel on the spec's GPU for the model:
    its scans' FLOP/s over the spec's bf16 peak, times head_dim / the
    kernel's head-dimension block where it pads (head_dim_block "pow2":
    the next power of two); a fraction of peak. Raises RuntimeError
    (kernel_chip) or ValueError (scan_slope)."""
    kernel, entry = kernel_chip(kernel_name, spec_rel)
    eff = kernel_flops(entry["scans"]) / spec["peak_flops"]["bf16"]
    hd = head_dim(config)
    if kernel.get("head_dim_block") == "pow2":
        eff *= hd / float(max(16, 1 << (hd - 1).bit_length()))
    return eff


def print_kernels():
    """--kernels: every kernel's throughput per GPU from its scans, each
    scan's own, and the check scans' (independent runs of the same chip)."""
    for name, kernel in attention_kernels().items():
        print("%s: %s" % (name, kernel["name"]))
        for chip, entry in kernel["chips"].items():
            for label, key in (("scans", "scans"), ("check", "check_scans")):
                if key not in entry:
                    continue
                print("  %s %s: pooled %.1f TFLOP/s (%s)" % (
                    chip, label, 1e-12 * kernel_flops(entry[key]),
                    ", ".join("%s %.1f" % (sc["model"], 1e-12 * kernel_flops([sc])) for sc in entry[key])))
            for spec_rel in entry["specs"]:
                spec = json.load(open(os.path.join(ROOT, spec_rel)))
                print("  %s: efficiency.attention %.3f of %.0f TFLOP/s bf16 at head dim 128 (spec's own %.3f)" % (
                    spec_rel, kernel_flops(entry["scans"]) / spec["peak_flops"]["bf16"],
                    spec["peak_flops"]["bf16"] * 1e-12, spec["efficiency"]["attention"]))


def pipeline_options(row, spec_path, report):
    opts = [
        "world-size=%d" % row["world_size"],
        "strategy=%s" % row.get("strategy", "full-shard"),
        "policy=block",
        "param-dtype=%s" % row["precision"]["param"],
        "reduce-dtype=%s" % row["precision"]["reduce"],
        "activation-checkpoint=%s" % row["activation_checkpoint"],
        "prefetch=%s" % row.get("prefetch", "fsdp2" if "FSDP2" in row["stack"] else "fsdp1"),
        "cluster=%s" % spec_path,
        "report=%s" % report,
        # The rows' steps are planned, never run: no arena offsets, which
        # change no number read here (fsdp-memory-plan's arena-offsets).
        "arena-offsets=false",
    ]
    stack = framework_memory(row)
    if stack != "fsdp-run":
        opts += ["framework-memory=%s" % stack, "framework-loss=%s" % framework_loss(row)]
    if row.get("pp", 1) > 1:
        # The pipeline's micro-batches: its schedule accumulates them
        # (pp-gather decides how a stage's gradients are reduced).
        opts += ["pp=%d" % row["pp"], "pp-schedule=%s" % row["pp_schedule"],
                 "micro-batches=%d" % row["grad_accum"]]
        if row["pp_schedule"] == "interleaved-1f1b":
            opts.append("pp-chunks=%d" % row["pp_chunks"])
        if row.get("pp_split_ends"):
            opts += ["pp-split-embedding=true", "pp-split-loss=true"]
        if "pp_split" in row:
            opts.append("pp-split=%s" % ",".join(str(b) for b in row["pp_split"]))
    elif row["grad_accum"] > 1:
        opts += ["micro-batches=%d" % row["grad_accum"],
                 "accumulate=%s" % row.get("accumulate", "sharded")]
    if "attention" in row:
        opts.append("attention=%s" % row["attention"])
    if row.get("fused_swiglu"):
        opts.append("fused-swiglu=true")
    if row.get("tp", 1) > 1:
        opts.append("tp=%d" % row["tp"])
        if "sequence_parallel" in row:
            opts.append("sequence-parallel=%s" % ("true" if row["sequence_parallel"] else "false"))
    return " ".join(opts)


def framework_memory(row):
    """A PyTorch FSDP row (its `stack` names FSDP): torch-compile where the
    row compiled its blocks (`compile`), else torch-eager (fsdp-memory-plan's
    framework-memory; include/fsdp/Analysis/FrameworkMemory.h); the others
    (Megatron-LM, DeepSpeed, Llama 3) fsdp-run, our runtime's plan."""
    if "FSDP" not in row["stack"] or row.get("pp", 1) > 1:
        # Megatron-LM, DeepSpeed, and pipeline-parallel stacks (Llama 3): the
        # PyTorch FSDP terms are modelled for pp = 1 only.
        return "fsdp-run"
    return "torch-compile" if row.get("compile") else "torch-eager"


def framework_loss(row):
    """llm-foundry's MPT (the Composer rows) computes its loss with flash-attn's
    fused CrossEntropyLoss (llmfoundry/models/mpt/modeling_mpt.py at 061f2c7:
    loss_fn defaults to 'fused_crossentropy'): `fused`. torchtitan calls
    torch's cross_entropy eagerly (train.py at 9dec370, its loss not
    compiled), and so is KempnerForge taken: `torch`."""
    return "fused" if row["stack"].startswith("Composer") else "torch"


def global_batch(row):
    """Sequences per optimizer step: micro_batch x grad_accum per
    data-parallel rank (world_size / (tp x pp) of them; a row's tp ranks
    share their sequences, and so do the pp stages of one pipeline)."""
    return row["micro_batch"] * row["grad_accum"] * row["world_size"] // (
        row.get("tp", 1) * row.get("pp", 1))


def row_spec(row, clusters, d, config):
    """The cluster spec a row runs on: its cluster's spec, whose
    efficiency.elementwise_traffic is PyTorch eager's (unfused elementwise
    kernels); a row that ran torch.compile (`"compile": true`) gets a copy
    written to directory `d` with elementwise_traffic 1 (Inductor fuses each
    elementwise chain into one pass; docs/compute-model.md); a row whose
    stack fuses its own kernels (`"fused_kernels"`) gets that stack's factor
    (FUSED_KERNELS_TRAFFIC); a row with an `attention_kernel` gets that
    kernel's efficiency.attention for the model `config`
    (kernel_attention_efficiency); a row with a `collective_stack` gets that
    profile of bench/fidelity/stacks.json as the copy's `stack` (how the
    stack issues and waits for its collectives; docs/collective-model.md,
    "Stacks")."""
    spec_rel = clusters[row["cluster"]]["spec"]
    path = os.path.join(ROOT, spec_rel)
    if not row.get("compile") and not any(k in row for k in ("fused_kernels", "collective_stack", "attention_kernel")):
        return path
    spec = json.load(open(path))
    if "attention_kernel" in row:
        try:
            spec["efficiency"]["attention"] = kernel_attention_efficiency(
                row["attention_kernel"], spec_rel, spec, config)
        except (RuntimeError, ValueError) as e:
            raise RuntimeError("row '%s': %s" % (row["id"], e))
    if row.get("compile"):
        spec.setdefault("efficiency", {})["elementwise_traffic"] = 1.0
    elif "fused_kernels" in row:
        if row["fused_kernels"] not in FUSED_KERNELS_TRAFFIC:
            raise RuntimeError("row '%s': fused_kernels '%s' is none of %s" % (
                row["id"], row["fused_kernels"], ", ".join(sorted(FUSED_KERNELS_TRAFFIC))))
        spec.setdefault("efficiency", {})["elementwise_traffic"] = FUSED_KERNELS_TRAFFIC[row["fused_kernels"]]
    if "collective_stack" in row:
        spec["stack"] = stack_profile(row["collective_stack"])
    out = os.path.join(d, "spec-row.json")
    json.dump(spec, open(out, "w"), indent=1)
    return out


def stack_profile(name):
    """The profile `name` of bench/fidelity/stacks.json (a spec's `stack`
    object); exits naming the file when there is none."""
    path = os.path.join(ROOT, "bench", "fidelity", "stacks.json")
    stacks = json.load(open(path))["stacks"]
    if name not in stacks:
        sys.exit("fidelity.py: no stack '%s' in %s (known: %s)" % (name, path, ", ".join(sorted(stacks))))
    return stacks[name]


def plan(row, clusters, build, tmp):
    """Plans one row; returns (row, report dict) or raises RuntimeError."""
    config = json.load(open(os.path.join(ROOT, row["model"])))
    if config.get("model_type") == "gpt2":
        config["n_positions"] = row["seq"]
    d = os.path.join(tmp, row["id"])
    os.makedirs(d, exist_ok=True)
    spec_path = row_spec(row, clusters, d, config)
    cfg = os.path.join(d, "config.json")
    json.dump(config, open(cfg, "w"))
    batch = global_batch(row)
    model, report = os.path.join(d, "model.mlir"), os.path.join(d, "report.json")
    loss = ["--loss-dtype", row["loss_dtype"]] if "loss_dtype" in row else []
    for cmd in (
        [os.path.join(build, "fsdp-import"), cfg, "--seq", str(row["seq"]),
         "--batch", str(batch), "-o", model] + loss,
        [os.path.join(build, "fsdp-opt"), model, "-o", os.devnull,
         "--fsdp-pipeline=" + pipeline_options(row, spec_path, report)],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("row '%s': %s failed (exit %d): %s" % (
                row["id"], os.path.basename(cmd[0]), p.returncode, p.stderr.strip()))
    return json.load(open(report)), json.load(open(spec_path))


def summary(ratios):
    logs = [abs(math.log(r)) for r in ratios]
    if not logs:
        return "-"
    return "mean |ln| %.3f (x%.2f), worst %.3f (x%.2f), n=%d" % (
        sum(logs) / len(logs), math.exp(sum(logs) / len(logs)), max(logs), math.exp(max(logs)), len(logs))


def tools_dir(args, tool, script):
    """The directory of the fsdp tools: args.build, or with --tools-on-path
    the one holding `tool` on PATH (the lit tests); exits naming `script`
    when it is not there."""
    if not args.tools_on_path:
        return args.build
    found = shutil.which(tool)
    if not found:
        sys.exit("%s: --tools-on-path: no %s on PATH" % (script, tool))
    return os.path.dirname(found)


def comparison_rows(ids, rows_file, same, script):
    """The rows of `rows_file` named by the comma-separated `ids`, checked to
    be one layout comparison: two or more, equal in every key of `same`;
    returns (rows, the file's clusters). Exits naming `script` otherwise."""
    doc = json.load(open(rows_file))
    by_id = {r["id"]: r for r in doc["rows"]}
    rows = []
    for rid in ids.split(","):
        if rid not in by_id:
            sys.exit("%s: no row '%s' in %s" % (script, rid, rows_file))
        rows.append(by_id[rid])
    if len(rows) < 2:
        sys.exit("%s: a ranking needs two rows or more" % script)
    for key in same:
        if len({json.dumps(r[key], sort_keys=True) for r in rows}) != 1:
            sys.exit("%s: the rows differ in '%s': not one layout comparison" % (script, key))
    return rows, doc["clusters"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "bin"),
                    help="directory of fsdp-import and fsdp-opt (default build/bin)")
    ap.add_argument("--tools-on-path", action="store_true",
                    help="take fsdp-import and fsdp-opt from PATH (the lit tests)")
    ap.add_argument("--rows-file", default=os.path.join(ROOT, "bench", "fidelity", "rows.json"))
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: every row)")
    ap.add_argument("--json", default="", help="write every row's prediction here")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kernels", action="store_true",
                    help="print the attention kernels' throughput derived from their scans, and exit")
    a = ap.parse_args()
    if a.kernels:
        print_kernels()
        return
    a.build = tools_dir(a, "fsdp-opt", "fidelity.py")
    doc = json.load(open(a.rows_file))
    rows = doc["rows"]
    if a.rows:
        want = a.rows.split(",")
        unknown = [w for w in want if w not in {r["id"] for r in rows}]
        if unknown:
            sys.exit("fidelity.py: --rows: no row '%s' in %s" % (unknown[0], a.rows_file))
        rows = [r for r in rows if r["id"] in want]
        for r in rows:
            if "not_planned" in r:
                sys.exit("fidelity.py: --rows: row '%s' is not planned: %s" % (r["id"], r["not_planned"]))
    else:
        # A row the planner cannot express as it ran (`not_planned` says
        # what) is never compared with its measurement.
        for r in rows:
            if "not_planned" in r:
                print("not planned: %s: %s" % (r["id"], r["not_planned"]))
        rows = [r for r in rows if "not_planned" not in r]
        # A row whose plan takes too long for the default run (its
        # `plan_deferred` says why) is planned only when --rows names it.
        for r in rows:
            if "plan_deferred" in r:
                print("deferred (plan it with --rows %s): %s" % (r["id"], r["plan_deferred"]))
        rows = [r for r in rows if "plan_deferred" not in r]
    results = []
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futures = [pool.submit(plan, r, doc["clusters"], a.build, tmp) for r in rows]
        for r, f in zip(rows, futures):
            try:
                report, spec = f.result()
            except RuntimeError as e:
                sys.exit("fidelity.py: %s" % e)
            pred = report["predicted_tokens_per_s"] / r["world_size"]
            meas = r["measured"]["tokens_per_s_per_gpu"]
            peak = report["per_rank"]["peak_bytes"]
            # The stack's peak (the plan plus what PyTorch keeps beyond it).
            stack_peak = report["per_rank"].get("framework", {}).get("peak_bytes", peak)
            alloc = report["per_rank"].get("allocator")
            if alloc is None:
                sys.exit("fidelity.py: row '%s': the spec %s has no allocator model" % (
                    r["id"], doc["clusters"][r["cluster"]]["spec"]))
            reserved = alloc["reserved_bytes"]
            pub = r["measured"].get("memory_gib")
            results.append({
                "id": r["id"], "split": r["split"], "predicted_tokens_per_s_per_gpu": pred,
                "measured_tokens_per_s_per_gpu": meas, "ratio": pred / meas,
                "planned_peak_gib": peak / GIB, "stack_peak_gib": stack_peak / GIB,
                "framework_memory": framework_memory(r), "allocator_overhead_gib": alloc["overhead_bytes"] / GIB,
                "reserved_gib": reserved / GIB, "measured_memory_gib": pub,
                "memory_ratio": reserved / GIB / pub if pub else None,
                "memory_verdict": ("ok" if abs(reserved / GIB / pub - 1) <= MEMORY_TOLERANCE else "OFF")
                if pub else "-",
                "fits": reserved <= spec["memory_bytes"], "mfu": report["mfu"],
                "efficiency_attention": spec["efficiency"]["attention"],
                "compute_s": report["compute_s"], "comm_s": report["comm_s"],
                "exposed_comm_s": report["exposed_comm_s"],
                "host_s": report.get("host_overhead_s", 0.0),
                "predicted_step_time_s": report["predicted_step_time_s"],
                "tp": r.get("tp", 1), "pp": r.get("pp", 1), "tokens_per_step": report["tokens_per_step"],
                "recompute_s": report.get("recompute_s", 0.0),
                "tp_exposed_s": report.get("tp_exposed_s", 0.0),
                "p2p_exposed_s": report.get("p2p_exposed_s", 0.0),
                "bubble_s": report.get("bubble_s", 0.0),
                "bubble_fraction": report.get("bubble_fraction", 0.0),
                "planned_pp_schedule": r.get("pp_schedule", "-"),
                "published_pp_schedule": r.get("published_pp_schedule", r.get("pp_schedule", "-"))})
    print("%-28s %-5s %10s %10s %7s %6s %7s %7s %9s %9s %9s %9s %7s %s" % (
        "row", "split", "predicted", "measured", "ratio", "MFU", "comp s", "comm s", "peak GiB",
        "stack GiB", "rsvd GiB", "pub GiB", "memory", "fits"))
    for x in results:
        pub = x["measured_memory_gib"]
        print("%-28s %-5s %10.0f %10.0f %7.3f %6.3f %7.3f %7.3f %9.1f %9.1f %9.1f %9s %7s %s" % (
            x["id"], x["split"], x["predicted_tokens_per_s_per_gpu"], x["measured_tokens_per_s_per_gpu"],
            x["ratio"], x["mfu"], x["compute_s"], x["comm_s"], x["planned_peak_gib"],
            x["stack_peak_gib"], x["reserved_gib"],
            "%.1f" % pub if pub else "-",
            "%s %.2f" % (x["memory_verdict"], x["memory_ratio"]) if pub else "-",
            "yes" if x["fits"] else "NO"))
    for split in ("train", "test"):
        print("%-5s: %s" % (split, summary([x["ratio"] for x in results if x["split"] == split])))
    print("all  : %s" % summary([x["ratio"] for x in results]))
    mem = [x for x in results if x["measured_memory_gib"]]
    print("memory: %d of %d plans fit the spec's memory (every published run fitted); "
          "reserved within %d%% of the published memory in %d of %d rows that give it%s" % (
              sum(x["fits"] for x in results), len(results), round(MEMORY_TOLERANCE * 100),
              sum(x["memory_verdict"] == "ok" for x in mem), len(mem),
              " (reserved / published: " + ", ".join(
                  "%s %.2f" % (x["id"], x["memory_ratio"]) for x in mem) + ")" if mem else ""))
    parallel = [x for x in results if x["tp"] > 1 or x["pp"] > 1]
    if parallel:
        # Where a tp / pp row's predicted step goes (the report's figures; for
        # pp > 1 the busiest stage's compute and collectives, the pipeline's
        # bubble: idle / busy of that stage, Narayanan et al. SC'21 Sec. 2.2).
        print("breakdown of the tp / pp rows (seconds per step): "
              "compute incl. recompute, exposed TP, exposed FSDP/DP, exposed p2p, bubble")
        print("%-28s %3s %3s %8s %8s %8s %8s %8s %8s %14s %s" % (
            "row", "tp", "pp", "step", "compute", "recomp", "TP exp", "DP exp", "p2p exp",
            "bubble (frac)", "schedule planned / published"))
        for x in parallel:
            print("%-28s %3d %3d %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %7.3f (%.3f) %s / %s" % (
                x["id"], x["tp"], x["pp"], x["predicted_step_time_s"], x["compute_s"],
                x["recompute_s"], x["tp_exposed_s"], x["exposed_comm_s"], x["p2p_exposed_s"],
                x["bubble_s"], x["bubble_fraction"], x["planned_pp_schedule"],
                x["published_pp_schedule"]))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
