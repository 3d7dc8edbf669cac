#!/usr/bin/env python3
"""Measured device rates against a cluster spec's assumptions.

usage: device_rates.py RATES.jsonl SPEC.json [--torch] [--spec-out MEASURED.json]
                       [--measured-on YYYY-MM-DD]

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
--spec-out: SPEC.json with the rates this device measured in place of the
assumed ones, written to MEASURED.json: efficiency.matmul and
matmul_half_k the K sweep's fit (a, h), efficiency.attention the forward
and backward together at the longest measured sequence ((F_fwd + F_bwd) /
(t_fwd + t_bwd) / peak), efficiency.memory the device-to-device copy's
bytes / memory_bandwidth; every other key (peaks and bandwidths from the
datasheet, the network, elementwise, comm_contention, the allocator) kept,
and a "sources" line saying which were measured, when (--measured-on, default
today) and how. Exit 1 if a rate it needs was not measured, or on unreadable
input (with a message); 2 for bad arguments. One run per RATES file: records
of several devices or dtypes are refused.
"""
import argparse
import datetime
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


def measured_spec(spec, recs, fit, out, measured_on):
    """Writes SPEC with the measured rates (module docstring, --spec-out)."""
    dev = next((r for r in recs if r["kind"] == "device"), {})
    att = {}
    for r in recs:
        if r["kind"] == "attention":
            f, t = att.get(r["seq"], (0.0, 0.0))
            att[r["seq"]] = (f + r["flops"], t + r["seconds"])
    copy = next((r for r in recs if r["kind"] == "bandwidth" and r["op"] == "memcpy"), None)
    if not fit or not att or not copy:
        sys.exit("device_rates.py: --spec-out needs the K sweep's fit, attention and the memcpy")
    dtype = next(r["dtype"] for r in recs if r["kind"] == "gemm")
    peak = spec["peak_flops"][dtype]
    seq = max(att)
    eff_att = {t: f / s / peak for t, (f, s) in att.items()}
    out_spec = json.loads(json.dumps(spec))
    e = out_spec.setdefault("efficiency", {})
    sig = lambda x: float("%.4g" % x)  # 4 significant digits
    # A sweep that does not slow down at small K (a CPU's) has no half-K.
    e["matmul"], e["matmul_half_k"] = sig(fit[0]), max(0.0, sig(fit[1]))
    e["attention"] = sig(eff_att[seq])
    e["memory"] = sig(copy["gbps"] * 1e9 / spec["memory_bandwidth"])
    out_spec["name"] = "%s, rates measured on one device (%s)" % (spec.get("name", "?"),
                                                    dev.get("device", "one device"))
    out_spec.setdefault("sources", []).append(
        "Measured %s on device %s (%s, %s) by bench/device_rates.cpp through the runtime's "
        "driver, summarised by bench/gpu/device_rates.py --spec-out: "
        "efficiency.matmul %.4g and matmul_half_k %g the least-squares fit of 1/eff = "
        "1/a + (h/a)/K over the K sweep (M = N = %d; was %s and %s); efficiency.attention "
        "%.4g the forward and backward together at sequence %d (%s; was %s); "
        "efficiency.memory %.4g a device-to-device copy (%.0f GB/s of %.0f; was %s). "
        "Not measured, kept: the peaks, bandwidths and the network, elementwise, "
        "elementwise_traffic, comm_contention and the allocator" % (
            measured_on, dev.get("device", "?"),
            dev.get("library", "?"), dtype, e["matmul"], e["matmul_half_k"],
            next(r["m"] for r in recs if r.get("role") == "sweep"),
            spec.get("efficiency", {}).get("matmul"),
            spec.get("efficiency", {}).get("matmul_half_k"), e["attention"], seq,
            ", ".join("%.3f at %d" % (eff_att[t], t) for t in sorted(eff_att)),
            spec.get("efficiency", {}).get("attention"), e["memory"], copy["gbps"],
            spec["memory_bandwidth"] / 1e9, spec.get("efficiency", {}).get("memory")))
    with open(out, "w") as f:
        json.dump(out_spec, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("wrote %s: matmul %.4g, matmul_half_k %g, attention %.4g, memory %.4g" % (
        out, e["matmul"], e["matmul_half_k"], e["attention"], e["memory"]))


def main():
    ap = argparse.ArgumentParser(usage=" ".join(
        " ".join(__doc__.strip().splitlines()[2:4]).split()[1:]))
    ap.add_argument("rates")
    ap.add_argument("spec")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--spec-out")
    ap.add_argument("--measured-on", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    with_torch = args.torch
    if with_torch:
        try:
            import torch
        except ImportError:
            sys.exit("device_rates.py: --torch needs PyTorch in this Python")
        if not torch.cuda.is_available():
            sys.exit("device_rates.py: --torch needs a CUDA device (torch sees none)")
    with open(args.rates) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    with open(args.spec) as f:
        spec = json.load(f)
    if not isinstance(spec, dict) or not isinstance(spec.get("peak_flops"), dict):
        sys.exit("device_rates.py: %s is not a cluster spec (no peak_flops)" % args.spec)
    runs = {(r.get("device"), r.get("dtype")) for r in recs if r.get("kind") == "device"}
    dtypes = {r.get("dtype") for r in recs if r.get("kind") in ("gemm", "attention")}
    if len(runs) > 1 or len(dtypes) > 1:
        sys.exit("device_rates.py: %s holds several runs (devices and dtypes %s): one run per "
                 "file" % (args.rates, sorted(map(str, runs | dtypes))))
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
    fit = None
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
            fit = (fa, fh)
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
    if args.spec_out:
        measured_spec(spec, recs, fit, args.spec_out, args.measured_on)


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        # Unreadable or malformed input (JSONDecodeError is a ValueError).
        sys.exit("device_rates.py: error: %s: %s" % (type(e).__name__, e))
