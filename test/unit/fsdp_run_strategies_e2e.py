#!/usr/bin/env python3
"""End-to-end test of the sharding strategies in fsdp-run (ctest
fsdp-run-strategies-e2e).

usage: fsdp_run_strategies_e2e.py FSDP_RUN MPIRUN SCHEDULE_DIR

Generates the hand-planned linear schedules of gen_linear.py for every
strategy of runtime/docs/schedule-format.md ("Sharding strategies"): no-shard
(param full, grad all_reduce avg over world, AdamW on full buffers),
shard-optimizer (param full; reduce_scatter -> local_shard -> AdamW on shards
-> all_gather of the new shard), hybrid-shard on 4 ranks as 2 replicas x 2
(all_gather/reduce_scatter over the shard group, all_reduce over replicate),
full-shard and shard-grad-op with explicit keys. Checks for each, in f64 (1e-10)
and f32 (1e-5): losses and dumped parameters / AdamW moments equal those of
world size 1, replicated copies agree exactly, the per-collective byte counts
are the ring volumes (G-1)/G*B and 2(G-1)/G*B, and --save/--load of full and
shard layouts resumes bit for bit. Then the errors: a grid with R*S != N, an
unknown group, a group whose size does not match the buffers, a bad layout.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_harness import ENV, FSDP_RUN, MPIRUN, SCHED, check, failures, finish, mpirun, tmp
GEN = os.path.join(SCHED, "gen_linear.py")
NUMEL = 70  # fc.weight [5, 13] + fc.bias [5]


def gen(n, dtype, strategy=None, replicas=1):
    name = "lin_%s_%s_np%d_r%d.json" % (strategy or "default", dtype, n, replicas)
    path = os.path.join(tmp, name)
    args = [sys.executable, GEN, str(n), dtype, path]
    if strategy:
        args += ["--strategy", strategy, "--replicas", str(replicas)]
    subprocess.run(args, check=True)
    return path


def run(n, sched, *extra):
    rc, out, err = mpirun(n, sched, *extra)
    if rc != 0:
        print(out, err)
        raise SystemExit("fsdp-run failed on %d ranks for %s" % (n, sched))
    return json.loads(out.strip().splitlines()[-1])


def close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def padded(numel, s):
    return max((numel + s - 1) // s * s, s)


def ring(b, g):  # all-gather / reduce-scatter bytes per rank
    return b // g * (g - 1)


def allreduce(b, g):
    return 2 * (g - 1) * b // g if g > 1 else 0


# (strategy, world size, replicas) and the expected bytes per rank per step.
CASES = [("no-shard", 2, 1), ("no-shard", 4, 1), ("shard-optimizer", 2, 1),
         ("shard-optimizer", 4, 1), ("hybrid-shard", 4, 2), ("hybrid-shard", 4, 4),
         ("hybrid-shard", 4, 1), ("full-shard", 4, 1), ("shard-grad-op", 3, 1)]


def expected_bytes(strategy, n, r, esize):
    s = n // r
    b = padded(NUMEL, s) * esize
    if strategy == "no-shard":
        return {"all_gather": 0, "reduce_scatter": 0, "all_reduce": allreduce(b, n)}
    if strategy == "hybrid-shard":
        return {"all_gather": ring(b, s), "reduce_scatter": ring(b, s),
                "all_reduce": allreduce(b // s, r)}
    return {"all_gather": ring(b, s), "reduce_scatter": ring(b, s), "all_reduce": 0}


# 1. Every strategy equals world size 1 (losses, params, AdamW moments).
for dtype, tol in (("f64", 1e-10), ("f32", 1e-5)):
    esize = 8 if dtype == "f64" else 4
    base_dump = os.path.join(tmp, "base_%s.json" % dtype)
    base = run(1, gen(1, dtype), "--steps", "6", "--seed", "7", "--dump-params", base_dump)
    with open(base_dump) as f:
        p1 = json.load(f)
    for strategy, n, r in CASES:
        tag = "%s %s np%d R%d" % (dtype, strategy, n, r)
        dump = os.path.join(tmp, "d_%s_%s_%d_%d.json" % (dtype, strategy, n, r))
        s = run(n, gen(n, dtype, strategy, r), "--steps", "6", "--seed", "7",
                "--dump-params", dump)
        with open(dump) as f:
            p = json.load(f)
        check(s["sharding"] == {"strategy": strategy, "replicas": r, "shard_size": n // r},
              "%s: summary names strategy and grid" % tag)
        check(close(s["losses"], base["losses"], tol), "%s: losses == np1" % tag)
        ok = all(p[role][fqn]["shape"] == want["shape"]
                 and close(p[role][fqn]["data"], want["data"], tol * 10)
                 for role in ("params", "exp_avg", "exp_avg_sq")
                 for fqn, want in p1[role].items())
        check(ok, "%s: dumped params and AdamW moments == np1 (one full tensor per FQN)" % tag)
        check(p["replica_max_abs_diff"] == 0, "%s: replicated copies agree exactly" % tag)
        want = expected_bytes(strategy, n, r, esize)
        got = s["comm_bytes_by_collective"]
        check(got == want and s["comm_bytes"] == sum(want.values()),
              "%s: bytes per rank per step %s (want %s)" % (tag, got, want))
        if dtype == "f32" and (strategy, n, r) in (("no-shard", 4, 1), ("shard-optimizer", 4, 1),
                                                   ("hybrid-shard", 4, 2), ("full-shard", 4, 1)):
            print("   bytes %s: %s, peak_bytes %d" % (tag, got, s["peak_bytes"]))

# 2. --save / --load with full and shard layouts: 3 + 3 steps == 6 steps.
for strategy, n, r in (("no-shard", 2, 1), ("shard-optimizer", 4, 1), ("hybrid-shard", 4, 2)):
    sched = gen(n, "f32", strategy, r)
    d6, d33, ck = (os.path.join(tmp, "%s_%s" % (x, strategy)) for x in ("d6", "d33", "ck"))
    a = run(n, sched, "--steps", "6", "--seed", "5", "--dump-params", d6)
    b = run(n, sched, "--steps", "3", "--seed", "5", "--save", ck)
    c = run(n, sched, "--steps", "3", "--seed", "5", "--load", ck, "--dump-params", d33)
    check(b["losses"] + c["losses"] == a["losses"] and c["first_step"] == 4,
          "%s: save/load losses identical to a straight run" % strategy)
    with open(d6) as f6, open(d33) as f33:
        check(f6.read() == f33.read(), "%s: save/load params and AdamW state identical" % strategy)
    with open(os.path.join(ck, "index.json")) as f:
        idx = json.load(f)
    # Only the written copies: DDP's rank 0, the first replica's shards.
    writers = {"no-shard": [0], "shard-optimizer": [0, 1, 2, 3], "hybrid-shard": [0, 1]}[strategy]
    check([e["rank"] for e in idx["files"]] == writers
          and idx["grid"] == {"replicas": r, "shard_size": n // r}
          and all(os.path.getsize(os.path.join(ck, e["path"])) == e["bytes"] for e in idx["files"]),
          "%s: index.json records the grid and the written copies' rank files" % strategy)
# Resharding across grids and layouts: HSDP 2x2 into full-shard at 4 and
# DDP into shard-optimizer continue as the straight runs of the target
# (another reduction order: within 1e-6).
for src, target, n in (("hybrid-shard", gen(4, "f32", "full-shard"), 4),
                       ("no-shard", gen(2, "f32", "shard-optimizer"), 2)):
    straight = run(n, target, "--steps", "6", "--seed", "5")
    resumed = run(n, target, "--steps", "3", "--seed", "5", "--load",
                  os.path.join(tmp, "ck_" + src))
    check(max(abs(x - y) / abs(y) for x, y in zip(resumed["losses"], straight["losses"][3:]))
          <= 1e-6, "a %s checkpoint resumes into another strategy" % src)


# 3. Errors, at load time, on every rank.
def broken(edit, name):
    with open(gen(4, "f32", "hybrid-shard", 2)) as f:
        d = json.load(f)
    edit(d)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(d, f)
    return mpirun(4, path)


rc, out, err = broken(lambda d: d["grid"].update(replicas=3), "grid.json")
check(rc != 0 and "grid: replicas 3 x shard_size 2 = 6 does not equal world_size 4" in err,
      "R x S != N is a clear error")
rc, out, err = broken(lambda d: d["grid"].update(replicas=4, shard_size=1), "pad.json")
check(rc != 0 and "shard_numel 35 do not match numel 70 over shard_size 1" in err,
      "units padded for another shard size are a clear error")


def bad_group(d):
    for i in d["instructions"]:
        if i["op"] == "fsdp.all_reduce":
            i["attrs"]["group"] = "replicas"


rc, out, err = broken(bad_group, "group.json")
check(rc != 0 and "'fsdp.all_reduce'" in err and "unknown group 'replicas'" in err
      and "(supported: world, shard, replicate, tensor, pipeline)" in err, "an unknown group is a clear error")
rc, out, err = broken(lambda d: [i["attrs"].update(group="pipeline") for i in d["instructions"]
                                 if i["op"] == "fsdp.all_reduce"], "pgroup.json")
check(rc != 0 and "group 'pipeline' needs a pipeline-parallel schedule" in err,
      "the pipeline group without pipeline stages is a clear error")


def world_gather(d):
    for i in d["instructions"]:
        if i["op"] == "fsdp.all_gather":
            i["attrs"]["group"] = "world"


rc, out, err = broken(world_gather, "gsize.json")
check(rc != 0 and "expected shard 35 x world group size 4" in err,
      "a group size that does not match the buffers is a clear error")
rc, out, err = broken(lambda d: d["inputs"][3].update(layout="full"), "layout.json")
check(rc != 0 and "does not hold unit 'fc' full padded buffer of 70" in err,
      "a layout that does not match the buffer is a clear error")
rc, out, err = broken(lambda d: d.update(strategy="zero-4"), "strategy.json")
check(rc != 0 and "unknown strategy 'zero-4'" in err, "an unknown strategy is a clear error")

finish()
