#!/usr/bin/env python3
"""PyTorch's training step of the block stack bench/gpu/check.sh section 5 runs.

The model: transformers' LlamaForCausalLM from CONFIG (Llama-3.1-8B's
test/lit/Inputs/models/llama-3.1-8b.json) cut to --layers blocks (default 2:
1.49e9 parameters), one sequence of --seq tokens (default 2048), the plan
prepare.sh compiles for fsdp-run (policy=block param-dtype=bf16, world size
1): f32 parameters, gradients and AdamW moments, every matmul and the
attention in bf16. PyTorch's usual way of running that on one GPU is
autocast (bf16, its weight-cast cache on: each weight is cast once per
forward, as FSDP's bf16 all-gather does) with SDPA attention and
torch.optim.AdamW(fused=True). Eager, as torchtitan's tables without
torch.compile.

Prints one JSON line: step_time_s (median of the timed steps, each ended by
torch.cuda.synchronize; seconds), step_time_mean_s, tokens_per_s, the
losses, max_memory_allocated_bytes and max_memory_reserved_bytes
(torch.cuda's allocator statistics since the first step), FLOP per step is
left to the caller (the plan's report has it).

usage: torch_block_stack.py CONFIG.json [--layers L] [--seq T] [--steps N]
                            [--warmup W] [--device cuda|cpu] [--hidden H
                            --intermediate I --heads A --kv-heads K
                            --vocab V: a smaller model, for a dry run]
Needs torch and transformers (the device machine has both). Exit 2 on bad
arguments.
"""
import argparse
import json
import statistics
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cuda")
    for k in ("hidden", "intermediate", "heads", "kv_heads", "vocab"):
        ap.add_argument("--" + k.replace("_", "-"), type=int)
    a = ap.parse_args()
    if a.warmup < 0 or a.steps <= a.warmup:
        ap.error("--warmup must be >= 0 and --steps exceed it")
    for k in ("layers", "seq", "hidden", "intermediate", "heads", "kv_heads", "vocab"):
        if getattr(a, k) is not None and getattr(a, k) < 1:
            ap.error("--%s must be positive" % k.replace("_", "-"))
    try:
        dev = torch.device(a.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        cfg = json.load(open(a.config))
    except (OSError, ValueError, RuntimeError) as e:
        ap.error("%s: %s" % (type(e).__name__, e))
    cfg["num_hidden_layers"] = a.layers
    for k, key in (("hidden", "hidden_size"), ("intermediate", "intermediate_size"),
                   ("heads", "num_attention_heads"), ("kv_heads", "num_key_value_heads"),
                   ("vocab", "vocab_size")):
        if getattr(a, k) is not None:
            cfg[key] = getattr(a, k)
    cfg.pop("torch_dtype", None)
    conf = LlamaConfig(**cfg)
    conf._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(conf).to(dev)  # f32 parameters
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=dev.type == "cuda")
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, conf.vocab_size, (a.steps, 1, a.seq), generator=gen).to(dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for s in range(a.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = model(input_ids=ids[s], labels=ids[s]).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    timed = times[a.warmup:]
    out = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        "params": sum(p.numel() for p in model.parameters()),
        "step_time_s": statistics.median(timed),
        "step_time_mean_s": statistics.mean(timed),
        "timed_steps": len(timed),
        "tokens_per_s": a.seq / statistics.median(timed),
        "losses": losses,
    }
    if dev.type == "cuda":
        out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
