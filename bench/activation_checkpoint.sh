#!/usr/bin/env bash
# Activation checkpointing (bench/README.md, "Activation checkpointing"):
# planned vs measured peak of the main job (tiny GPT-2, 4 layers, hidden 128,
# 4 ranks, full-shard, f32) with activation-checkpoint=none, selective and
# full, measured by fsdp-run --alloc per-buffer (glibc's high-water mark,
# device_peak_bytes), and the step time of each side by side (--alloc arena);
# then the planner's figures for Llama-3.1-8B at 8 ranks (one unit per
# block, bf16, one 8192-token sequence per rank, on the DGX H100 spec).
# Usage: bench/activation_checkpoint.sh [build dir] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/bin
STEPS=${2:-20}
SPEC=bench/clusters/h100-sxm-8.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -np 4)
"$BIN/fsdp-import" test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o "$T/gpt2.mlir"
echo "| main job (GPT-2, 4 ranks, f32) | planned peak B | + kernel scratch B | measured (per-buffer) B | measured / planned | recompute ops | recompute GFLOP/rank | step s (arena, median) | final loss |"
echo "|---|---|---|---|---|---|---|---|---|"
for ac in none selective full; do
  "$BIN/fsdp-opt" "$T/gpt2.mlir" --fsdp-pipeline="world-size=4 policy=block activation-checkpoint=$ac report=$T/r-$ac.json" \
    | "$BIN/fsdp-translate" --fsdp-to-schedule -o "$T/$ac.json"
  "${MPI[@]}" "$BIN/fsdp-run" "$T/$ac.json" --steps 3 --alloc per-buffer < /dev/null | tail -1 > "$T/pb-$ac.log"
  "${MPI[@]}" "$BIN/fsdp-run" "$T/$ac.json" --steps "$STEPS" --data test/data/tinyshakespeare.txt < /dev/null | tail -1 > "$T/ar-$ac.log"
  python3 - "$T" "$ac" <<'PY'
import json, sys
t, ac = sys.argv[1:]
r = json.load(open(f"{t}/r-{ac}.json"))
s = json.load(open(f"{t}/{ac}.json"))["memory_plan"]
pb = json.load(open(f"{t}/pb-{ac}.log"))
ar = json.load(open(f"{t}/ar-{ac}.log"))
print(f"| {ac} | {s['peak_bytes']} | {s['peak_bytes_with_scratch']} | {pb['device_peak_bytes']} | "
      f"{pb['device_peak_bytes'] / s['peak_bytes_with_scratch']:.3f} | {r.get('recompute_ops', 0)} | "
      f"{r.get('recompute_flops', 0) / 1e9:.4f} | {ar['step_time_s']:.4f} | {ar['final_loss']:.6f} |")
PY
done
echo
echo "| Llama-3.1-8B, 8 ranks (planner) | peak GiB/rank | activation GiB at the peak | most activation GiB | recompute TFLOP/rank | predicted step s | recompute s | MFU | fits 80 GB |"
echo "|---|---|---|---|---|---|---|---|---|"
"$BIN/fsdp-import" test/lit/Inputs/models/llama-3.1-8b.json --batch 8 --seq 8192 -o "$T/l8b.mlir"
for ac in none selective full; do
  "$BIN/fsdp-opt" "$T/l8b.mlir" --fsdp-pipeline="world-size=8 policy=block param-dtype=bf16 activation-checkpoint=$ac cluster=$SPEC report=$T/l-$ac.json" -o /dev/null
  python3 - "$T/l-$ac.json" "$ac" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["per_rank"]
g = 2 ** 30
print(f"| {sys.argv[2]} | {p['peak_bytes'] / g:.2f} | {p['peak_bytes_by_class']['activation'] / g:.2f} | "
      f"{p['max_bytes_by_class']['activation'] / g:.2f} | {r.get('recompute_flops', 0) / 1e12:.2f} | "
      f"{r['predicted_step_time_s']:.4f} | {r.get('recompute_s', 0):.4f} | {r['mfu']:.3f} | "
      f"{'yes' if p['peak_bytes'] <= 80e9 else 'NO'} |")
PY
done
