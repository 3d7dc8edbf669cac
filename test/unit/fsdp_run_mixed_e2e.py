#!/usr/bin/env python3
"""End-to-end test of mixed precision in fsdp-run (ctest fsdp-run-mixed-e2e).

usage: fsdp_run_mixed_e2e.py FSDP_RUN MPIRUN SCHEDULE_DIR

Generates the hand-planned linear schedules of gen_linear.py with
--param-dtype ("Mixed precision" in runtime/docs/schedule-format.md): bf16
compute with cast-on-gather (the f32 shard cast before the all_gather) and a
reduce_scatter in f32 or bf16, the same with master-weights=separate (a bf16
`param` and an f32 `master` input), and f16 compute; runs each for 5 steps
on 1, 2 and 4 ranks and checks:
- against world size 1 and against the f32 schedule, within the tolerances
  observed (the max over runs when written, times ~3):
    bf16: losses 1e-2 relative (observed 2.6e-3), parameters 5e-3 absolute
          (observed 1.7e-3; parameters are O(0.3), AdamW lr 0.05);
    f16:  losses 2e-3 relative (observed 3.2e-4), parameters 1e-3 absolute
          (observed 1.2e-4);
- cast-on-gather and separate agree bit for bit (a bf16 param initialised
  as the rounded master equals cast(master));
- bf16 really is used: the bf16 loss differs from the f32 one;
- bytes: all-gather (N-1)/N of 2·padded bytes, reduce-scatter of the reduce
  dtype's bytes; peak_bytes equals the planned peak of the schedule's
  buffers (the runtime's f32 scratch is not counted);
- --save/--load of a bf16 param + f32 master resumes bit for bit, the index
  records each role's dtype, and loading an f32 checkpoint into the bf16
  schedule fails naming the dtype.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_harness import ENV, FSDP_RUN, MPIRUN, SCHED, check, failures, finish, mpirun, tmp
GEN = os.path.join(SCHED, "gen_linear.py")
NUMEL = 70  # fc.weight [5, 13] + fc.bias [5]
STEPS = 5
TOL = {"bf16": (1e-2, 5e-3), "f16": (2e-3, 1e-3)}  # (loss relative, param absolute)

# name -> gen_linear.py options (param dtype, reduce dtype, master weights)
VARIANTS = {
    "bf16_cog_f32": ("bf16", "f32", "cast-on-gather"),
    "bf16_cog_bf16": ("bf16", "bf16", "cast-on-gather"),
    "bf16_sep_bf16": ("bf16", "bf16", "separate"),
    "bf16_sep_f32": ("bf16", "f32", "separate"),
    "f16_cog_f16": ("f16", "f16", "cast-on-gather"),
}


def gen(n, variant=None):
    path = os.path.join(tmp, "lin_%s_np%d.json" % (variant or "f32", n))
    args = [sys.executable, GEN, str(n), "f32", path]
    if variant:
        p, r, m = VARIANTS[variant]
        args += ["--param-dtype", p, "--reduce-dtype", r, "--master-weights", m]
    subprocess.run(args, check=True)
    return path


def run(n, sched, *extra):
    rc, out, err = mpirun(n, sched, *extra)
    if rc != 0:
        print(out, err)
        raise SystemExit("fsdp-run failed on %d ranks for %s" % (n, sched))
    return json.loads(out.strip().splitlines()[-1])


def dump_of(path):
    with open(path) as f:
        d = json.load(f)
    return [v for k in sorted(d["params"]) for v in d["params"][k]["data"]]


def rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def absd(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def ring(b, g):
    return b // g * (g - 1)


def planned_peak(path):
    """Bytes of the schedule's buffers at their high-water mark, simulating
    the runtime's allocation rules (inputs first, results before their
    instruction, views bound to their root, an output that `aliases` a state
    input written into that input's bytes, frees after)."""
    with open(path) as f:
        s = json.load(f)
    bufs = {b["id"]: b for b in s["buffers"]}

    def root(i):
        return root(bufs[i]["view_of"]) if "view_of" in bufs[i] else i

    aliased = {root(o["buffer"]) for o in s["outputs"] if "aliases" in o}
    live, cur, peak = set(), 0, 0
    for io in s["inputs"]:
        live.add(io["buffer"])
        cur += bufs[io["buffer"]]["bytes"]
    peak = cur
    for ins in s["instructions"]:
        for r in ins["results"]:
            if root(r) not in live:
                live.add(root(r))
                cur += 0 if root(r) in aliased else bufs[root(r)]["bytes"]
        peak = max(peak, cur)
        frees = list(ins["frees"]) + (ins["operands"] if ins["op"] == "fsdp.free" else [])
        for i in frees:
            if "view_of" not in bufs[i] and i in live:
                live.remove(i)
                cur -= bufs[i]["bytes"]
    return peak


# 1. Every variant and f32 on 1, 2, 4 ranks.
res = {}
for n in (1, 2, 4):
    for v in [None] + list(VARIANTS):
        sched = gen(n, v)
        dump = os.path.join(tmp, "dump_%s_%d.json" % (v or "f32", n))
        s = run(n, sched, "--steps", str(STEPS), "--dump-params", dump)
        res[(v, n)] = (s, dump_of(dump), sched)

for v, (pdt, rdt, master) in VARIANTS.items():
    ltol, ptol = TOL[pdt]
    for n in (1, 2, 4):
        s, params, sched = res[(v, n)]
        f32s, f32p, _ = res[(None, n)]
        if n > 1:
            s1, p1, _ = res[(v, 1)]
            check(rel(s["losses"], s1["losses"]) <= ltol and absd(params, p1) <= ptol,
                  "%s np%d vs np1: losses %.1e rel, params %.1e abs" %
                  (v, n, rel(s["losses"], s1["losses"]), absd(params, p1)))
        check(rel(s["losses"], f32s["losses"]) <= ltol and absd(params, f32p) <= ptol,
              "%s np%d vs f32: losses %.1e rel, params %.1e abs" %
              (v, n, rel(s["losses"], f32s["losses"]), absd(params, f32p)))
        check(len(params) == NUMEL, "%s np%d dumps %d values" % (v, n, NUMEL))
        pad = max((NUMEL + n - 1) // n * n, n)
        es = {"f32": 4, "bf16": 2, "f16": 2}
        cb = s["comm_bytes_by_collective"]
        check(cb["all_gather"] == ring(pad * 2, n) and
              cb["reduce_scatter"] == ring(pad * es[rdt], n),
              "%s np%d bytes: all_gather %d, reduce_scatter %d" %
              (v, n, cb["all_gather"], cb["reduce_scatter"]))
        check(s["peak_bytes"] == planned_peak(sched),
              "%s np%d peak_bytes %d == planned %d" %
              (v, n, s["peak_bytes"], planned_peak(sched)))
    check(res[(v, 1)][0]["losses"] != res[(None, 1)][0]["losses"],
          "%s losses differ from f32 (computed in %s)" % (v, pdt))

for n in (1, 2, 4):
    for r in ("f32", "bf16"):
        a, b = res[("bf16_cog_" + r, n)], res[("bf16_sep_" + r, n)]
        check(a[0]["losses"] == b[0]["losses"] and a[1] == b[1],
              "np%d reduce %s: cast-on-gather == separate bit for bit" % (n, r))

# 2. Save / load of a bf16 param and its f32 master.
sched = res[("bf16_sep_bf16", 2)][2]
ck = os.path.join(tmp, "ck")
run(2, sched, "--steps", "3", "--save", ck)
d2 = os.path.join(tmp, "resumed.json")
s = run(2, sched, "--steps", "2", "--load", ck, "--dump-params", d2)
full = res[("bf16_sep_bf16", 2)]
check(s["losses"] == full[0]["losses"][3:] and dump_of(d2) == full[1],
      "bf16 param + f32 master: 3 steps + save + load + 2 steps == 5 steps bit for bit")
with open(os.path.join(ck, "index.json")) as f:
    index = json.load(f)
check({t["role"]: t["dtype"] for t in index["tensors"]} ==
      {"param": "bf16", "master": "f32", "exp_avg": "f32", "exp_avg_sq": "f32"},
      "index records each role's dtype")
shard = 35
check(os.path.getsize(os.path.join(ck, "rank1.bin")) == shard * (2 + 4 + 4 + 4),
      "rank file holds 2-byte param and f32 master, exp_avg, exp_avg_sq")
ck32 = os.path.join(tmp, "ck32")
run(2, res[(None, 2)][2], "--steps", "1", "--save", ck32)
# An f32 checkpoint loads into the bf16 schedule: the master from the f32
# param, the bf16 param its rounding (what a fresh bf16 run starts from).
s32 = run(2, sched, "--steps", "1", "--load", ck32)
check(s32["first_step"] == 2 and abs(s32["losses"][0] - res[(None, 2)][0]["losses"][1]) < 3e-2,
      "an f32 checkpoint resumes in bf16 (master from the f32 param)")

if not failures:
    print("all mixed-precision checks passed")
finish()
