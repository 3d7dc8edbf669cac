#!/usr/bin/env bash
# Tensor parallelism measured beside the simulator on this machine's CPU
# ranks: the main job's shape (GPT-2 architecture, 4 layers, hidden 128, 4
# heads, vocabulary 256, sequence 64, global batch 16; tools/scripts/
# run-main.sh) at 2 and 4 ranks as FSDP-N (tp=1), TP-N (tp=N) and, at 4,
# FSDP 2 x TP 2, each planned with cluster=$SPEC: by default (CALIBRATE=1)
# a spec fsdp-calibrate measures in the same run, right before the layouts
# are measured, with min(cores, largest world of LAYOUTS) ranks and
# --devices-per-node the largest world ($OUT/spec.json; the
# machine's speed drifts by 10-30 % over hours). Per layout: the step time (fsdp-run's
# step_time_mean_s, REPS runs, layouts alternating, each through
# bench/quiet_run.py) beside the predicted step, the peak memory per rank
# (plan, plan with the cpu driver's scratch, the allocator's
# device_peak_bytes from a --alloc per-buffer run) and the bytes each rank
# sends per step (FSDP all-gather + reduce-scatter, and all-reduce: the
# tensor-parallel all-reduces, there being no FSDP all-reduce in full-shard)
# beside the plan's ring volume (per_rank.comm_bytes_by_collective,
# tp_bytes_per_step).
#
# usage: bench/tp_vs_simulator.sh [BUILD_DIR]      (default build)
# env:   STEPS (40), WARMUP (10), REPS (3), OUT, LAYOUTS
#        ("2:1 2:2 4:1 4:4 4:2", world:tp), CALIBRATE (1: fsdp-calibrate
#        first, through bench/quiet_run.py, into $OUT/spec.json; 0: SPEC),
#        SPEC (a cluster spec; setting it implies CALIBRATE=0; default
#        bench/clusters/this-machine.json, or $OUT/spec.json when
#        ANALYZE_ONLY finds one), ANALYZE_ONLY=1 (REPREDICT=1 with it: plan
#        the saved model again with SPEC, new reports and traces, the saved
#        runs kept; REPREDICT=saved: simulate the saved schedules, the ones
#        that ran, with SPEC)
# A benchmark: nothing is asserted. Targets (issue 22): predicted / measured
# step time within 0.85-1.15 per layout, the same ranking, the bytes exact.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/bin
STEPS=${STEPS:-40}
WARMUP=${WARMUP:-10}
REPS=${REPS:-3}
LAYOUTS=${LAYOUTS:-2:1 2:2 4:1 4:4 4:2}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The spec: given, calibrated now, or (analysis only) the one calibrated then.
source bench/same_run_spec.sh
if [ -z "${ANALYZE_ONLY:-}" ]; then
"$B/fsdp-import" test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 \
  --vocab 256 --seq 64 --batch 16 -o "$OUT/gpt2.mlir"
for l in $LAYOUTS; do
  n=${l%%:*} t=${l#*:}
  "$B/fsdp-opt" "$OUT/gpt2.mlir" --fsdp-pipeline="world-size=$n tp=$t policy=block optimizer=adamw \
lr=1e-3 weight-decay=0.1 cluster=$SPEC report=$OUT/report-$n-$t.json trace=$OUT/trace-$n-$t.json" \
    -o "$OUT/gpt2-$n-$t.mlir"
  "$B/fsdp-translate" "$OUT/gpt2-$n-$t.mlir" --fsdp-to-schedule -o "$OUT/gpt2-$n-$t.json"
  # The allocator's measure: one allocation per buffer, 2 steps.
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$B/fsdp-run" "$OUT/gpt2-$n-$t.json" \
    --steps 2 --seed 0 --data test/data/tinyshakespeare.txt --alloc per-buffer \
    > "$OUT/mem-$n-$t.log" 2> "$OUT/mem-$n-$t.err"
done
for rep in $(seq 1 "$REPS"); do
  for l in $LAYOUTS; do
    n=${l%%:*} t=${l#*:}
    python3 bench/quiet_run.py -- mpirun --allow-run-as-root --oversubscribe -np "$n" \
      "$B/fsdp-run" "$OUT/gpt2-$n-$t.json" --steps "$STEPS" --warmup "$WARMUP" --seed 0 \
      --data test/data/tinyshakespeare.txt > "$OUT/run-$n-$t-$rep.log" 2> "$OUT/run-$n-$t-$rep.err"
    echo "world $n tp $t repeat $rep: $(tail -1 "$OUT/run-$n-$t-$rep.err")" >&2
  done
done
elif [ "${REPREDICT:-}" = saved ]; then
# The schedules that ran, simulated again with SPEC (fsdp-memory-plan keeps
# the schedule; a new plan may schedule differently under another spec).
for l in $LAYOUTS; do
  n=${l%%:*} t=${l#*:}
  "$B/fsdp-opt" "$OUT/gpt2-$n-$t.mlir" --fsdp-memory-plan="cluster=$SPEC \
report=$OUT/report-$n-$t.json trace=$OUT/trace-$n-$t.json" -o /dev/null
done
elif [ -n "${REPREDICT:-}" ]; then
for l in $LAYOUTS; do
  n=${l%%:*} t=${l#*:}
  "$B/fsdp-opt" "$OUT/gpt2.mlir" --fsdp-pipeline="world-size=$n tp=$t policy=block optimizer=adamw \
lr=1e-3 weight-decay=0.1 cluster=$SPEC report=$OUT/report-$n-$t.json trace=$OUT/trace-$n-$t.json" \
    -o /dev/null
done
fi
python3 - "$OUT" "$SPEC" "$REPS" $LAYOUTS <<'PY'
import json, statistics, sys
out, spec, reps, layouts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
last = lambda p: json.loads(open(p).read().strip().splitlines()[-1])
name = lambda n, t: "TP-%d" % n if t == n else ("FSDP-%d" % n if t == 1 else "FSDP %d x TP %d" % (n // t, t))
print("simulator vs measured under tensor parallelism, spec %s" % spec)
print("| layout | predicted step (s) | measured step (s): median [min, max] | predicted / measured | "
      "predicted TP exposed / FSDP exposed (s) | measured comm wait (s) | peak: plan / with scratch / allocator (bytes) | "
      "FSDP bytes/rank/step: planned / measured (world, shard, replicate channels) | "
      "TP bytes/rank/step: planned / measured (tensor channel) |")
print("|---|---|---|---|---|---|---|---|---|")
rank_pred, rank_meas = {}, {}
for l in layouts:
    n, t = map(int, l.split(":"))
    rep = json.load(open("%s/report-%d-%d.json" % (out, n, t)))
    sched = json.load(open("%s/gpt2-%d-%d.json" % (out, n, t)))
    mem = last("%s/mem-%d-%d.log" % (out, n, t))
    runs = [last("%s/run-%d-%d-%d.log" % (out, n, t, r)) for r in range(1, reps + 1)]
    means = [r["step_time_mean_s"] for r in runs]
    m, pred = statistics.median(means), rep["predicted_step_time_s"]
    # Per channel and rank (fsdp-run's comm_bytes_by_rank; runs before it
    # have rank 0's comm_bytes_by_group alone): the tensor group's against
    # the plan's TP collectives, the data-parallel groups' (world, shard,
    # replicate) against its FSDP collectives. Shown: the largest over the
    # ranks, "(differ)" when any rank's is not the plan's.
    fsdp_plan, tp_plan = rep["per_rank"]["comm_bytes_per_step"], rep["per_rank"]["tp_bytes_per_step"]
    by_rank = runs[0].get("comm_bytes_by_rank") or (
        [runs[0]["comm_bytes_by_group"]] if "comm_bytes_by_group" in runs[0] else None)
    fsdp_all = [sum(g.get(k, 0) for k in ("world", "shard", "replicate")) for g in by_rank] if by_rank else None
    tp_all = [g.get("tensor", 0) for g in by_rank] if by_rank else None
    fsdp_meas = max(fsdp_all) if fsdp_all else None
    tp_meas = max(tp_all) if tp_all else None
    wait = statistics.median(r["comm_wait_time_s"] for r in runs)
    rank_pred[name(n, t)], rank_meas[name(n, t)] = pred, m
    print("| %s | %.4f | %.4f [%.4f, %.4f] | %.3f | %.4f / %.4f | %.4f | %d / %d / %d | %d / %s%s | %d / %s%s |" % (
        name(n, t), pred, m, min(means), max(means), pred / m, rep["tp_exposed_s"], rep["exposed_comm_s"], wait,
        sched["memory_plan"]["peak_bytes"], sched["memory_plan"]["peak_bytes_with_scratch"], mem["device_peak_bytes"],
        fsdp_plan, "n/a" if fsdp_meas is None else fsdp_meas, "" if not fsdp_all or set(fsdp_all) == {fsdp_plan} else " (differ)",
        tp_plan, "n/a" if tp_meas is None else tp_meas, "" if not tp_all or set(tp_all) == {tp_plan} else " (differ)"))
for n in sorted({int(l.split(":")[0]) for l in layouts}):
    ks = [name(int(a), int(b)) for a, b in (l.split(":") for l in layouts) if int(a) == n]
    p = sorted(ks, key=rank_pred.get)
    q = sorted(ks, key=rank_meas.get)
    print("%d ranks, fastest first: predicted %s; measured %s%s" % (n, ", ".join(p), ", ".join(q),
          "" if p == q else " (ranking differs)"))
PY
echo "(schedules, reports, traces and run logs in $OUT)"
