#!/usr/bin/env bash
# Regenerates the tiny language-model schedules used by fsdp_run_e2e.py with
# the compiler (fsdp-import, fsdp-opt --fsdp-pipeline, fsdp-translate):
#   gpt2_tiny_np{1,2}.json   GPT-2, 1 layer, C = 16, 2 heads, V = 256, T = 8,
#                            global batch 4, AdamW
#   llama_tiny_np2.json      Llama, 1 layer, C = 16, 4 heads / 2 kv heads
#                            (GQA, RoPE, RMSNorm, SiLU), V = 256, T = 8
# usage: gen_lm.sh BUILD_DIR   (run from anywhere)
set -euo pipefail
B=${1:?build dir}/bin
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=$HERE/../../lit/Inputs/models
TMP=$(mktemp -d)
"$B/fsdp-import" "$MODELS/gpt2.json" --layers 1 --hidden 16 --heads 2 --vocab 256 \
  --seq 8 --batch 4 -o "$TMP/gpt2.mlir"
"$B/fsdp-import" "$MODELS/llama-3.2-1b.json" --layers 1 --hidden 16 --heads 4 \
  --kv-heads 2 --intermediate 32 --vocab 256 --seq 8 --batch 4 -o "$TMP/llama.mlir"
for np in 1 2; do
  "$B/fsdp-opt" "$TMP/gpt2.mlir" --fsdp-pipeline="world-size=$np optimizer=adamw lr=0.01" \
    -o "$TMP/gpt2_$np.mlir"
  "$B/fsdp-translate" "$TMP/gpt2_$np.mlir" --fsdp-to-schedule -o "$HERE/gpt2_tiny_np$np.json"
done
"$B/fsdp-opt" "$TMP/llama.mlir" --fsdp-pipeline="world-size=2 optimizer=adamw lr=0.01" \
  -o "$TMP/llama_2.mlir"
"$B/fsdp-translate" "$TMP/llama_2.mlir" --fsdp-to-schedule -o "$HERE/llama_tiny_np2.json"
rm -rf "$TMP"
