#!/usr/bin/env bash
# The cpu driver's allocator sampling (bench/README.md, "Allocator sampling on
# large schedules"): one large schedule, the main job's GPT-2 (4 layers,
# hidden 128, sequence 64) as a 4-stage 1F1B pipeline of 32 micro-batches
# (2 sequences each) on 4 ranks, run by two builds side by side, alternating,
# with --alloc per-buffer (every buffer one allocation: the peak tests' mode)
# and --alloc arena (the default); prints each run's median step time and
# the allocator's peaks (device_peak_bytes, device_step_peak_bytes). The
# AFTER build also runs with FSDP_CPU_HEAP_AUDIT=1 (every sample measured):
# its stderr lines say how many samples it skipped and whether any skipped
# one lay above the mark.
# Usage: bench/heap_sampling.sh BEFORE_BUILD AFTER_BUILD [steps] [pairs]
set -euo pipefail
cd "$(dirname "$0")/.."
B0=$1/bin
B1=$2/bin
STEPS=${3:-4}
PAIRS=${4:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -np 4)
"$B1/fsdp-import" test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 \
  --vocab 256 --seq 64 --batch 64 -o "$T/gpt2.mlir"
"$B1/fsdp-opt" "$T/gpt2.mlir" \
  --fsdp-pipeline="world-size=4 pp=4 pp-schedule=1f1b micro-batches=32 policy=block" |
  "$B1/fsdp-translate" --fsdp-to-schedule -o "$T/pp.json"
row() { # build label alloc
  python3 - "$T/run.log" "$1" "$2" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {s['step_time_s']:.4f} | {s['device_peak_bytes']} | "
      f"{s['device_step_peak_bytes']} | {s['final_loss']:.6f} |")
PY
}
echo "| build | alloc | step s (median) | device_peak_bytes | device_step_peak_bytes | final loss |"
echo "|---|---|---|---|---|---|"
for _ in $(seq "$PAIRS"); do
  for alloc in per-buffer arena; do
    for side in before after; do
      bin=$B0
      [ "$side" = after ] && bin=$B1
      "${MPI[@]}" "$bin/fsdp-run" "$T/pp.json" --steps "$STEPS" --warmup 1 --alloc "$alloc" \
        < /dev/null > "$T/run.log"
      row "$side" "$alloc"
    done
  done
done
echo
echo "after, FSDP_CPU_HEAP_AUDIT=1, --alloc per-buffer (one line per rank):"
"${MPI[@]}" -x FSDP_CPU_HEAP_AUDIT=1 "$B1/fsdp-run" "$T/pp.json" --steps "$STEPS" \
  --alloc per-buffer < /dev/null 2>&1 > "$T/run.log" | grep 'heap audit'
