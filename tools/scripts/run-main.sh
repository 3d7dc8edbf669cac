#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, import a GPT-2
# architecture (the real Hugging Face config, shrunk to 4 layers, hidden 128,
# 4 heads, byte vocabulary 256, sequence 64, global batch 16), compile it into
# a fully sharded schedule for 4 ranks and train it under mpirun on
# tinyshakespeare, printing the loss per step and a JSON summary.
#
# Usage: tools/scripts/run-main.sh [STEPS]          (default 500)
# Environment: MODEL=gpt2|llama (default gpt2), NP (ranks, default 4),
#              DATA (text file, default test/data/tinyshakespeare.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-500}
NP=${NP:-4}
MODEL=${MODEL:-gpt2}
DATA=${DATA:-test/data/tinyshakespeare.txt}
bash tools/scripts/setup.sh
bash tools/scripts/build.sh
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
out=build/main
mkdir -p "$out"
case "$MODEL" in
  gpt2)
    build/bin/fsdp-import test/lit/Inputs/models/gpt2.json \
      --layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o "$out/$MODEL.mlir" ;;
  llama)
    # Llama 3.2 architecture: GQA (4 heads, 2 kv-heads), RoPE, RMSNorm, SwiGLU, tied embeddings.
    build/bin/fsdp-import test/lit/Inputs/models/llama-3.2-1b.json \
      --layers 4 --hidden 128 --heads 4 --kv-heads 2 --intermediate 384 --vocab 256 --seq 64 \
      --batch 16 -o "$out/$MODEL.mlir" ;;
  *) echo "run-main.sh: MODEL must be gpt2 or llama, got '$MODEL'" >&2; exit 2 ;;
esac
build/bin/fsdp-opt "$out/$MODEL.mlir" \
  --fsdp-pipeline="world-size=$NP policy=block optimizer=adamw lr=1e-3 weight-decay=0.1" \
  --mlir-print-debuginfo -o "$out/$MODEL.sharded.mlir"
build/bin/fsdp-translate "$out/$MODEL.sharded.mlir" --fsdp-to-schedule -o "$out/$MODEL.schedule.json"
mpirun --allow-run-as-root --oversubscribe -np "$NP" \
  build/bin/fsdp-run "$out/$MODEL.schedule.json" --steps "$STEPS" --seed 0 --data "$DATA"
