#!/usr/bin/env python3
"""Measured device rates against a cluster spec's assumptions.

usage: python3 bench/gpu/device_rates.py RATES.jsonl SPEC.json [--torch]

RATES.jsonl is fsdp-device-rates' stdout (bench/device_rates.cpp), SPEC.json
a cluster spec (bench/clusters/h200-8.json). Prints, per GEMM, the measured
efficiency (TFLOP/s / peak_flops[dtype]) next to the simulator's model
efficiency.matmul * K / (K + efficiency.matmul_half_k), K the inner dimension
(ClusterSpec::matmulEfficiency, include/fsdp/Analysis/Simulator.h), and their
ratio; a least-squares fit of the K sweep to 1/eff = 1/a + (h/a) * (1/K),
linear in 1/K (the model's a and h); attention's efficiency against
efficiency.attention; and the bandwidths against memory_bandwidth *
efficiency.memory. Plain Python (no numpy). --torch: each GEMM also run
through PyTorch (torch.matmul on CUDA, same shapes, dtype and transposes as
views, as many calls after a warm-up, timed to a torch.cuda.synchronize),
side by side: the runtime's cuBLAS calls against PyTorch's on one GPU.
"""
import json
import sys


def torch_tflops(r):
    """PyTorch's TFLOP/s for GEMM record r (module docstring)."""
    import time
    import torch
    dt = {"bf16": torch.bfloat16, "f32": torch.float32}[r["dtype"]]
    m, n, k = r["m"], r["n"], r["k"]
    a = torch.randn((k, m) if r["trans_a"] else (m, k), device="cuda", dtype=dt)
    b = torch.randn((n, k) if r["trans_b"] else (k, n), device="cuda", dtype=dt)
    a, b = (a.t() if r["trans_a"] else a), (b.t() if r["trans_b"] else b)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    calls = max(3, r["calls"])
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    return 2.0 * m * n * k * calls / (time.perf_counter() - t0) / 1e12


def main():
    args = [a for a in sys.argv[1:] if a != "--torch"]
    with_torch = len(args) < len(sys.argv) - 1
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = args
    with open(sys.argv[1]) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    with open(sys.argv[2]) as f:
        spec = json.load(f)
    eff = spec.get("efficiency", {})
    a, h = eff.get("matmul", 1.0), eff.get("matmul_half_k", 0.0)

    def model(k):  # ClusterSpec::matmulEfficiency
        return a if h <= 0 else a * k / (k + h)

    def peak(r):
        p = spec["peak_flops"].get(r["dtype"])
        if not p:
            sys.exit("device_rates.py: the spec has no peak_flops[%r]" % r["dtype"])
        return p

    print("spec %s: matmul %.3f, matmul_half_k %g, attention %.3f, "
          "memory %.3f x %.3g B/s" % (spec.get("name", "?"), a, h,
                                       eff.get("attention", 1.0),
                                       eff.get("memory", 1.0),
                                       spec.get("memory_bandwidth", 0)))
    for r in recs:
        if r["kind"] == "device":
            print("device %s (%s %s), dtype %s%s" % (
                r["device"], r["library"], r["library_version"], r["dtype"],
                ", quick" if r.get("quick") else ""))
    print("\n%-6s %-8s %6s %6s %6s %3s %9s %8s %8s %6s%s" % (
        "gemm", "name", "M", "N", "K", "op", "TFLOP/s", "eff", "model",
        "ratio", "   torch  ours/torch" if with_torch else ""))
    sweep = []
    for r in recs:
        if r["kind"] != "gemm":
            continue
        e, m = r["tflops"] * 1e12 / peak(r), model(r["k"])
        if r["role"] == "sweep":
            sweep.append((r["k"], e))
        tt = ""
        if with_torch:
            t = torch_tflops(r)
            tt = " %7.2f %11.3f" % (t, r["tflops"] / t)
        print("%-6s %-8s %6d %6d %6d %s%s  %9.2f %8.4g %8.4f %6.3f%s" % (
            r["role"], r["name"], r["m"], r["n"], r["k"],
            "T" if r["trans_a"] else "N", "T" if r["trans_b"] else "N",
            r["tflops"], e, m, e / m, tt))
    if len(sweep) >= 2:
        # 1/eff = c0 + c1 * (1/K): a = 1/c0, h = c1/c0.
        xs = [1.0 / k for k, _ in sweep]
        ys = [1.0 / e for _, e in sweep]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        c1 = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        c0 = my - c1 * mx
        if c0 > 0:
            fa, fh = 1.0 / c0, c1 / c0
            worst = max(abs(fa * k / (k + fh) / e - 1) for k, e in sweep)
            print("\nK sweep fit 1/eff = 1/a + (h/a)/K over K = %s: a = %.4g, "
                  "h = %.4g (max misfit %.1f%%); spec a = %.4f, h = %g" % (
                      ",".join(str(k) for k, _ in sweep), fa, fh,
                      100 * worst, a, h))
        else:
            print("\nK sweep fit: intercept 1/a = %.4g <= 0, no asymptote" % c0)
    ea = eff.get("attention", 1.0)
    for r in recs:
        if r["kind"] == "attention":
            e = r["tflops"] * 1e12 / peak(r)
            print("attention %-8s seq %5d: %7.2f TFLOP/s, eff %.4g vs "
                  "efficiency.attention %.3f (ratio %.3f)" % (
                      r["pass"], r["seq"], r["tflops"], e, ea, e / ea))
    bw = spec.get("memory_bandwidth", 0) * eff.get("memory", 1.0)
    for r in recs:
        if r["kind"] == "bandwidth":
            print("bandwidth %-14s: %8.1f GB/s vs memory_bandwidth x "
                  "efficiency.memory %.1f GB/s (ratio %.3f)" % (
                      r["op"], r["gbps"], bw / 1e9,
                      r["gbps"] * 1e9 / bw if bw else float("nan")))


if __name__ == "__main__":
    main()
