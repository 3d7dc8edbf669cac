#!/usr/bin/env bash
# The simulator's honesty check on this machine: plans the main job (GPT-2
# architecture, 4 layers, hidden 128, 4 heads, vocabulary 256, sequence 64,
# global batch 16; tools/scripts/run-main.sh) at NP ranks with
# cluster=$SPEC (default bench/clusters/this-machine.json, written by
# `mpirun -np 4 fsdp-calibrate -o ...`) for each prefetch mode, runs each
# schedule REPS times alternating, each time once without profiling (the
# measured step time) and once with fsdp-run --profile (the breakdown), each
# run through bench/quiet_run.py (started on an idle machine, repeated if
# other processes used more than 0.3 cores meanwhile), and prints predicted
# vs measured step time and their ratio, then predicted vs measured seconds
# per op kind (the simulator's trace vs fsdp-run's profile: kernels by op
# name; the spec's host terms as "(step set-up)", "(dispatch)" and
# "(collectives on host)" next to the profile's "(step set-up)",
# "(interpreter)" and "(comm wait)").
#
# usage: bench/simulator_vs_measured.sh [BUILD_DIR]      (default build)
# env:   NP (4), STEPS (40), WARMUP (10), REPS (3), PREFETCH ("none auto"),
#        SPEC (bench/clusters/this-machine.json), PROGRESS (fsdp-run's default),
#        OUT (a directory for the schedules, reports, traces and logs),
#        ANALYZE_ONLY=1 (print the tables of an earlier run's OUT again)
# A benchmark: nothing is asserted. Target: predicted within 25% of measured.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/bin
NP=${NP:-4}
STEPS=${STEPS:-40}
WARMUP=${WARMUP:-10}
REPS=${REPS:-3}
PREFETCH=${PREFETCH:-none auto}
SPEC=${SPEC:-bench/clusters/this-machine.json}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -z "${ANALYZE_ONLY:-}" ]; then
"$B/fsdp-import" test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 \
  --vocab 256 --seq 64 --batch 16 -o "$OUT/gpt2.mlir"
for pf in $PREFETCH; do
  "$B/fsdp-opt" "$OUT/gpt2.mlir" --fsdp-pipeline="world-size=$NP policy=block optimizer=adamw \
lr=1e-3 weight-decay=0.1 prefetch=$pf cluster=$SPEC report=$OUT/report-$pf.json \
trace=$OUT/trace-$pf.json" -o "$OUT/gpt2-$pf.mlir"
  "$B/fsdp-translate" "$OUT/gpt2-$pf.mlir" --fsdp-to-schedule -o "$OUT/gpt2-$pf.json"
done
progress=()
[ -n "${PROGRESS:-}" ] && progress=(--progress "$PROGRESS")
# Per repeat and schedule: a timed run (no profiling: its timers cost
# about 2 µs per instruction) and a profiled run for the per-op breakdown.
for rep in $(seq 1 "$REPS"); do
  for pf in $PREFETCH; do
    for kind in run prof; do
      prof=()
      [ "$kind" = prof ] && prof=(--profile)
      python3 bench/quiet_run.py -- mpirun --allow-run-as-root --oversubscribe -np "$NP" \
        "$B/fsdp-run" "$OUT/gpt2-$pf.json" --steps "$STEPS" --warmup "$WARMUP" --seed 0 \
        --data test/data/tinyshakespeare.txt "${prof[@]}" "${progress[@]}" \
        > "$OUT/$kind-$pf-$rep.log" 2> "$OUT/$kind-$pf-$rep.err"
      echo "prefetch $pf repeat $rep $kind: $(tail -1 "$OUT/$kind-$pf-$rep.err")" >&2
    done
  done
done
fi
python3 - "$OUT" "$SPEC" "$NP" "$REPS" $PREFETCH <<'EOF'
import collections, json, statistics, sys
out, spec, np_, reps, prefetches = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
print("simulator vs measured: main job at %s ranks, spec %s (%s)" % (np_, spec, json.load(open(spec))["name"]))
print("%-9s %-10s %-30s %-8s %-10s %-10s %-10s %-10s %s" % ("prefetch", "predicted", "measured: median [min, max]",
      "ratio", "pred comp", "pred host", "pred comm", "meas kern", "meas wait"))
per_op = {}
for pf in prefetches:
    rep_ = json.load(open("%s/report-%s.json" % (out, pf)))
    load = lambda kind, r: json.loads(open("%s/%s-%s-%d.log" % (out, kind, pf, r)).read().strip().splitlines()[-1])
    runs = [load("run", r) for r in range(1, reps + 1)]
    profs = [load("prof", r) for r in range(1, reps + 1)]
    means = [r["step_time_mean_s"] for r in runs]
    m = statistics.median(means)
    pred = rep_["predicted_step_time_s"]
    kern = statistics.median(r["compute_time_s"] for r in runs)
    wait = statistics.median(r["comm_wait_time_s"] for r in runs)
    print("%-9s %-10.4f %.4f [%.4f, %.4f]         %-8.3f %-10.4f %-10.4f %-10.4f %-10.4f %.4f" %
          (pf, pred, m, min(means), max(means), pred / m, rep_["compute_s"], rep_.get("host_overhead_s", 0),
           rep_["comm_s"], kern, wait))
    # Per op kind: the simulator's trace events vs the mean over runs of the profile.
    trace = json.load(open("%s/trace-%s.json" % (out, pf)))["traceEvents"]
    predicted = collections.defaultdict(float)
    for e in trace:
        if e.get("ph") == "X" and e.get("cat") == "compute":
            predicted[e["name"]] += e["dur"] * 1e-6
        elif e.get("ph") == "X" and e.get("cat") == "host":
            # the collectives' non-overlapped share and the step's I/O
            key = "(step set-up)" if e["name"].startswith("host: step") else "(collectives on host)"
            predicted[key] += e["dur"] * 1e-6
    predicted["(dispatch)"] = rep_.get("host_overhead_s", 0) - predicted.get("(step set-up)", 0)
    measured = collections.defaultdict(float)
    for r in profs:
        for k, v in r["profile"].items():
            measured[k] += v["seconds"] / len(profs)
    per_op[pf] = (predicted, measured)
for pf in prefetches:
    predicted, measured = per_op[pf]
    print("\nper op kind, prefetch %s: predicted vs measured seconds per step (ratio = predicted / measured)" % pf)
    names = sorted(set(predicted) | set(measured), key=lambda n: -max(predicted.get(n, 0), measured.get(n, 0)))
    for n in names:
        p, m = predicted.get(n, 0.0), measured.get(n, 0.0)
        if p < 1e-5 and m < 1e-5:
            continue
        ratio = "%.2f" % (p / m) if p > 0 and m > 0 else ("not simulated" if m > 0 else "-")
        print("  %-28s %9.2f ms %9.2f ms   %s" % (n, p * 1e3, m * 1e3, ratio))
EOF
echo "(schedules, reports, traces and run logs in $OUT)"
