"""Checks of fsdp-sweep's --json output, for the lit tests in test/lit/Sweep.

  check-sweep.py same SWEEP.json STRATEGY WORLD POLICY REPORT.json [TP]
      the sweep's row (strategy, world size, policy block|size, tensor-parallel
      degree, default 1) has exactly the
      report that fsdp-opt --fsdp-pipeline="... cluster=SPEC report=REPORT.json"
      wrote for the same options: prints "same peak_bytes predicted_step_time_s".
  check-sweep.py consistent SWEEP.json
      every planned row's table numbers follow from its report (peak, fits
      against memory_bytes: the reserved bytes where the spec has an
      allocator model, step time, tokens/s = global tokens / step with
      global tokens = world size / tp x micro-batch x seq, MFU, exposed comm,
      step / lower bound, schedule, the tensor-parallel bytes and exposed time,
      and what bounds the step, recomputed from the report's keys as
      fsdp-sweep's --help defines it): prints "consistent N rows, K fit".
"""
import json
import sys


def row_of(sweep, strategy, world, policy, tp=1):
    rows = [r for r in sweep["rows"]
            if r["strategy"] == strategy and r["world_size"] == world and r["policy"] == policy
            and r.get("tp", 1) == tp]
    if len(rows) != 1:
        sys.exit(f"expected one row {strategy} {world} {policy}, found {len(rows)}")
    return rows[0]


def same(args):
    sweep = json.load(open(args[0]))
    row = row_of(sweep, args[1], int(args[2]), args[3], int(args[5]) if len(args) > 5 else 1)
    report = json.load(open(args[4]))
    if "error" in row:
        sys.exit("the sweep's row failed: " + row["error"])
    if row["report"] != report:
        diff = [k for k in set(report) | set(row["report"])
                if report.get(k) != row["report"].get(k)]
        sys.exit(f"reports differ in {sorted(diff)}")
    if row["peak_bytes"] != report["per_rank"]["peak_bytes"]:
        sys.exit("peak_bytes differs")
    if row["predicted_step_time_s"] != report["predicted_step_time_s"]:
        sys.exit("predicted_step_time_s differs")
    print("same peak_bytes predicted_step_time_s")


def bound(rep, memory):
    if rep["per_rank"].get("allocator", {}).get("reserved_bytes", rep["per_rank"]["peak_bytes"]) > memory:
        return "memory"
    compute = rep["compute_s"] + rep.get("host_overhead_s", 0)
    if rep["comm_s"] > compute + rep["tp_comm_s"]:
        return "FSDP comm"
    tp, fsdp = rep["tp_exposed_s"], rep["exposed_comm_s"]
    if tp > compute and tp >= fsdp:
        return "TP comm"
    return "FSDP comm" if fsdp > compute else "compute"


def consistent(args):
    sweep = json.load(open(args[0]))
    memory = sweep["memory_bytes"]
    planned = [r for r in sweep["rows"] if "error" not in r]
    for r in planned:
        rep = r["report"]
        checks = {
            "peak": r["peak_bytes"] == rep["per_rank"]["peak_bytes"],
            # The allocator's overhead counts where the spec models it.
            "fits": r["fits"] == (r["report"]["per_rank"].get("allocator", {}).get(
                "reserved_bytes", r["peak_bytes"]) <= memory),
            "step": r["predicted_step_time_s"] == rep["predicted_step_time_s"],
            "tokens/s": abs(r["predicted_tokens_per_s"] * r["predicted_step_time_s"]
                            - r["tokens_per_step"]) <= 1e-9 * r["tokens_per_step"],
            "global tokens": r["tokens_per_step"] == rep["tokens_per_step"]
                             == rep["world_size"] // r.get("tp", 1) * sweep["micro_batch"] * sweep["seq"],
            "tp": r.get("tp", 1) == rep["grid"]["tensor_parallel"]
                  and r["tp_bytes"] == rep["tp_bytes"] == rep["per_rank"]["tp_bytes_per_step"]
                  and r["tp_exposed_s"] == rep["tp_exposed_s"],
            "what bounds": r["bound"] == bound(rep, memory),
            "schedule": r["schedule"] == rep["schedule"],
            "mfu": r["mfu"] == rep["mfu"],
            "exposed": r["exposed_comm_s"] == rep["exposed_comm_s"],
            "bound": abs(r["step_over_lower_bound"] * rep["lower_bound_s"]
                         - rep["predicted_step_time_s"]) <= 1e-12 * rep["predicted_step_time_s"],
            "units": r["units"] == len(rep["units"]),
            "bucket": 0 < r["bucket_mean_bytes"] <= r["bucket_max_bytes"],
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            sys.exit(f"row {r['strategy']} {r['world_size']} {r['policy']}: {bad}")
    print(f"consistent {len(planned)} rows, {sum(r['fits'] for r in planned)} fit")


{"same": same, "consistent": consistent}[sys.argv[1]](sys.argv[2:])
