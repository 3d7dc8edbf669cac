#!/usr/bin/env python3
"""End-to-end test of fsdp-run (ctest fsdp-run-e2e).

usage: fsdp_run_e2e.py FSDP_RUN MPIRUN SCHEDULE_DIR

Runs the hand-planned linear schedules (gen_linear.py) on 1..4 ranks and
checks: losses agree across world sizes (f64 to 1e-10, f32 to 1e-4), the
dumped parameters agree and have their padding stripped, the loss falls,
comm_bytes is the ring volume, arena_bytes is 0 without a memory plan
(and the planned arena with one), CSV data works, and errors (bad arguments,
world-size mismatch, missing or malformed data file) exit non-zero with a
clear message instead of hanging. Then the compiled tiny GPT-2 and Llama
schedules (gen_lm.sh) with byte-level text data (np1 == np2, tokens_per_s,
short or missing file), --save/--load (3 + 3 steps == 6 steps, bit for bit;
mismatched checkpoints abort) and the unsharded-schedule error.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_harness import ENV, FSDP_RUN, MPIRUN, SCHED, check, failures, finish, mpirun, tmp


def summary(n, sched, *extra):
    rc, out, err = mpirun(n, os.path.join(SCHED, sched), *extra)
    if rc != 0:
        print(out, err)
        raise SystemExit("fsdp-run failed on %d ranks for %s" % (n, sched))
    return json.loads(out.strip().splitlines()[-1]), out


def close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))



# 1. Losses and parameters agree across world sizes.
for dtype, sizes, tol in (("f64", (1, 2, 3), 1e-10), ("f32", (1, 2, 4), 1e-4)):
    runs = {}
    for n in sizes:
        dump = os.path.join(tmp, "params_%s_%d.json" % (dtype, n))
        s, out = summary(n, "linear_%s_np%d.json" % (dtype, n), "--steps", "8", "--seed", "7",
                         "--dump-params", dump)
        with open(dump) as f:
            runs[n] = (s, json.load(f))
        check(s["world_size"] == n and s["steps"] == 8 and len(s["losses"]) == 8,
              "%s np%d summary fields" % (dtype, n))
        check(out.splitlines()[0].startswith("step 1 loss "), "%s np%d per-step line" % (dtype, n))
    s1, p1 = runs[sizes[0]]
    for n in sizes[1:]:
        s, p = runs[n]
        check(close(s["losses"], s1["losses"], tol), "%s losses np1 == np%d" % (dtype, n))
        for role in ("params", "exp_avg", "exp_avg_sq"):
            for fqn, want in p1[role].items():
                got = p[role][fqn]
                check(got["shape"] == want["shape"] and close(got["data"], want["data"], tol * 10),
                      "%s %s %s np1 == np%d" % (dtype, role, fqn, n))
    check(len(p1["params"]["fc.weight"]["data"]) == 65 and p1["params"]["fc.bias"]["shape"] == [5],
          "%s dump strips padding" % dtype)

# 2. Ring volume: 70 f32 elements over 2 ranks -> all-gather 140 + reduce-scatter 140 bytes.
s, _ = summary(2, "linear_f32_np2.json", "--steps", "2")
check(s["comm_bytes"] == 280, "comm_bytes is the ring volume (got %s)" % s["comm_bytes"])
check(s["peak_bytes"] > 0 and s["step_time_s"] > 0 and s["samples_per_s"] > 0,
      "peak bytes and timings reported")
check(s["arena_bytes"] == 0, "no memory plan: no arena (got %s)" % s["arena_bytes"])

# 3. The model learns the synthetic teacher.
s, _ = summary(2, "linear_f32_np2.json", "--steps", "40", "--seed", "1")
first, last = sum(s["losses"][:5]) / 5, sum(s["losses"][-5:]) / 5
check(last < 0.7 * first, "loss falls (%.3f -> %.3f)" % (first, last))

# 4. CSV data: identical results on 1 and 2 ranks.
csv = os.path.join(tmp, "data.csv")
with open(csv, "w") as f:
    for r in range(30):
        feats = [((r * 7 + j * 3) % 11) / 5.0 - 1.0 for j in range(13)]
        f.write(",".join("%g" % v for v in feats) + ",%d\n" % (r % 5))
a, _ = summary(1, "linear_f64_np1.json", "--steps", "5", "--data", csv)
b, _ = summary(2, "linear_f64_np2.json", "--steps", "5", "--data", csv)
check(close(a["losses"], b["losses"], 1e-10), "CSV data losses np1 == np2")

# 5. Errors.
p = subprocess.run([FSDP_RUN, "--steps", "x"], env=ENV, capture_output=True, text=True, timeout=20)
check(p.returncode == 2 and "usage:" in p.stderr, "bad arguments exit 2 with usage")
p = subprocess.run([FSDP_RUN, os.path.join(SCHED, "linear_f32_np1.json"), "--frobnicate"],
                   env=ENV, capture_output=True, text=True, timeout=20)
check(p.returncode == 2 and "unknown option --frobnicate" in p.stderr, "unknown option exit 2")
p = subprocess.run([FSDP_RUN, os.path.join(SCHED, "linear_f32_np1.json"), "--steps", "3",
                    "--steps", "5"], env=ENV, capture_output=True, text=True, timeout=20)
check(p.returncode == 2 and "--steps given twice" in p.stderr, "a repeated option exits 2")
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np1.json"))
check(rc != 0 and "planned for world_size 1 but 2 rank(s)" in err, "world size mismatch aborts")
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np2.json"), "--data", "/nonexistent.csv")
check(rc != 0 and "cannot open data file '/nonexistent.csv'" in err, "missing data file aborts")
bad = os.path.join(tmp, "bad.csv")
with open(bad, "w") as f:
    f.write(",".join(["0.5"] * 13) + ",1\n" + ",".join(["0.5"] * 12) + ",1\n")
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np2.json"), "--data", bad)
check(rc != 0 and bad + ":2: expected 14 values" in err, "malformed data file names the line")
with open(bad, "w") as f:  # one global batch of rows (12), one label out of range
    f.write((",".join(["0.5"] * 13) + ",1\n") * 11 + ",".join(["0.5"] * 13) + ",9\n")
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np2.json"), "--data", bad)
check(rc != 0 and "label 9" in err and "outside [0, 5)" in err, "label out of range aborts")
# Only rank 1 sees the bad label (rows 6..11 are its rows): rank 0 is then
# blocked in a collective and must be stopped by rank 1's MPI_Abort.
with open(bad, "w") as f:
    for r in range(12):
        f.write(",".join(["0.5"] * 13) + ",%d\n" % (9 if r == 11 else 1))
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np2.json"), "--data", bad)
check(rc != 0 and "[rank 1]" in err and "label 9" in err, "failure on one rank stops all ranks")
notjson = os.path.join(tmp, "x.json")
with open(notjson, "w") as f:
    f.write("{ nope")
rc, out, err = mpirun(2, notjson)
check(rc != 0 and "not valid JSON" in err, "non-JSON schedule aborts")

# 6. Language models (tokens/targets schedules compiled by gen_lm.sh).
text = os.path.join(tmp, "text.txt")
with open(text, "wb") as f:  # every byte value, so tokens span [0, 256)
    f.write(bytes(range(256)) * 3 + b"To be, or not to be, that is the question.\n" * 20)
g1, _ = summary(1, "gpt2_tiny_np1.json", "--steps", "6", "--seed", "3", "--data", text)
g2, out = summary(2, "gpt2_tiny_np2.json", "--steps", "6", "--seed", "3", "--data", text)
check(close(g1["losses"], g2["losses"], 1e-4), "GPT-2 text losses np1 == np2")
check(abs(g2["tokens_per_s"] - 32 / g2["step_time_s"]) < 1e-6 * g2["tokens_per_s"],
      "tokens_per_s = global batch 4 x T 8 / step_time_s")
check(g2["compute_time_s"] > 0 and g2["comm_wait_time_s"] >= 0
      and g2["compute_time_s"] <= g2["step_time_s"] * 1.5, "per-step compute/comm times")
s, _ = summary(2, "gpt2_tiny_np2.json", "--steps", "3")
check(len(s["losses"]) == 3 and all(x == x for x in s["losses"]), "GPT-2 synthetic tokens")
with open(os.path.join(SCHED, "gpt2_tiny_np2.json")) as f:
    plan = json.load(f)["memory_plan"]
check(s["arena_bytes"] == plan["arena_bytes"] and s["peak_bytes"] == plan["peak_bytes"],
      "planned arena allocated (%s == %s), measured peak = planned (%s == %s)"
      % (s["arena_bytes"], plan["arena_bytes"], s["peak_bytes"], plan["peak_bytes"]))
s, _ = summary(2, "llama_tiny_np2.json", "--steps", "15", "--data", text)
check(sum(s["losses"][-3:]) < sum(s["losses"][:3]),
      "Llama (GQA, RoPE, RMSNorm, SiLU) loss falls (%.3f -> %.3f)"
      % (s["losses"][0], s["losses"][-1]))
short = os.path.join(tmp, "short.txt")
with open(short, "wb") as f:
    f.write(b"12345678")
rc, out, err = mpirun(2, os.path.join(SCHED, "gpt2_tiny_np2.json"), "--data", short)
check(rc != 0 and "has 8 bytes; a window of T+1 = 9 bytes is needed" in err,
      "text shorter than T+1 aborts")
rc, out, err = mpirun(2, os.path.join(SCHED, "gpt2_tiny_np2.json"), "--data", "/nonexistent.txt")
check(rc != 0 and "cannot open data file '/nonexistent.txt'" in err, "missing text file aborts")

# 7. --save / --load: 6 steps straight == 3 steps, save, load, 3 steps.
for sched, extra in (("linear_f32_np2.json", []), ("gpt2_tiny_np2.json", ["--data", text])):
    d6, d33, ck = (os.path.join(tmp, x + sched) for x in ("d6_", "d33_", "ck_"))
    a, _ = summary(2, sched, "--steps", "6", "--seed", "5", "--dump-params", d6, *extra)
    b, _ = summary(2, sched, "--steps", "3", "--seed", "5", "--save", ck, *extra)
    c, _ = summary(2, sched, "--steps", "3", "--seed", "5", "--load", ck, "--dump-params", d33,
                   *extra)
    check(b["losses"] + c["losses"] == a["losses"] and c["first_step"] == 4,
          "%s: save/load losses identical to a straight run" % sched)
    with open(d6) as f6, open(d33) as f33:
        check(f6.read() == f33.read(), "%s: save/load params and AdamW state identical" % sched)
    with open(os.path.join(ck, "index.json")) as f:
        idx = json.load(f)
    check(idx["version"] == 2 and idx["world_size"] == 2 and idx["step"] == 3
          and len(idx["files"]) == 2 and idx["roles"] == ["param", "exp_avg", "exp_avg_sq"]
          and all(os.path.getsize(os.path.join(ck, e["path"])) == e["bytes"] for e in idx["files"])
          and idx["run"]["seed"] == 5
          and {t["role"] for t in idx["tensors"]} == {"param", "exp_avg", "exp_avg_sq"},
          "%s: index.json names world size, step, roles, rank files and every FQN's ranges" % sched)
# Resharding: the 2-rank checkpoint continues on 1 rank as the 1-rank run
# does (f32: another reduction order, so within 1e-6, not bit for bit).
ck = os.path.join(tmp, "ck_linear_f32_np2.json")
a1, _ = summary(1, "linear_f32_np1.json", "--steps", "6", "--seed", "5")
c1, _ = summary(1, "linear_f32_np1.json", "--steps", "3", "--seed", "5", "--load", ck)
check(c1["first_step"] == 4 and max(abs(x - y) / abs(y) for x, y in
                                     zip(c1["losses"], a1["losses"][3:])) <= 1e-6,
      "a 2-rank checkpoint resumes on 1 rank")
rc, out, err = mpirun(2, os.path.join(SCHED, "gpt2_tiny_np2.json"), "--load", ck)
check(rc != 0 and "does not match schedule" in err, "load into another model aborts")
rc, out, err = mpirun(2, os.path.join(SCHED, "linear_f32_np2.json"), "--load", "/nonexistent")
check(rc != 0 and "--load: cannot open '/nonexistent/index.json'" in err, "load of a missing dir")

# 8. An unsharded schedule (fsdp-autodiff alone: param inputs by fqn, no unit).
unsharded = os.path.join(tmp, "unsharded.json")
with open(unsharded, "w") as f:
    json.dump({"format": "fsdp-schedule", "version": 2, "world_size": 1, "units": [],
               "buffers": [{"id": 0, "dtype": "f64", "shape": [3], "class": "param"},
                           {"id": 1, "dtype": "f64", "shape": []}],
               "inputs": [{"buffer": 0, "role": "param", "fqn": "w"}],
               "outputs": [{"buffer": 1, "role": "loss"}],
               "instructions": [{"op": "nn.reduce_sum", "operands": [0], "results": [1],
                                 "attrs": {"axes": [0]}}]}, f)
rc, out, err = mpirun(1, unsharded)
check(rc != 0 and "(role 'param', fqn 'w') is a whole unsharded parameter" in err,
      "unsharded schedule gives a clear error")

finish()
