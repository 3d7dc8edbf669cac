#!/usr/bin/env bash
# Benchmark of the main job (tiny GPT-2 on tinyshakespeare, see
# tools/scripts/run-main.sh): tokens per second at 1, 2 and 4 ranks and the
# time per step split into compute and time blocked on collectives, as fsdp-run
# measures them (median over steps of the max over ranks). Writes a markdown
# table to stdout. Not a test: the numbers depend on the machine.
#
# Usage: bench/main_job.sh [STEPS] [RANKS...]     (default 40 steps; 1 2 4 ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-40}; shift || true
RANKS=${*:-1 2 4}
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
out=build/bench
mkdir -p "$out"
build/bin/fsdp-import test/lit/Inputs/models/gpt2.json \
  --layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o "$out/gpt2.mlir"
echo "| ranks | tokens/s | step time (s) | compute (s) | comm wait (s) | peak bytes/rank | comm bytes/rank/step |"
echo "|---|---|---|---|---|---|---|"
for n in $RANKS; do
  build/bin/fsdp-opt "$out/gpt2.mlir" \
    --fsdp-pipeline="world-size=$n policy=block lr=1e-3 weight-decay=0.1" |
    build/bin/fsdp-translate --fsdp-to-schedule -o "$out/gpt2.$n.json"
  mpirun --allow-run-as-root --oversubscribe -np "$n" build/bin/fsdp-run "$out/gpt2.$n.json" \
    --steps "$STEPS" --seed 0 --data test/data/tinyshakespeare.txt > "$out/log.$n.txt"
  python3 - "$out/log.$n.txt" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"| {s['world_size']} | {s['tokens_per_s']:.0f} | {s['step_time_s']:.4f} | "
      f"{s['compute_time_s']:.4f} | {s['comm_wait_time_s']:.4f} | {s['peak_bytes']} | {s['comm_bytes']} |")
PY
done
