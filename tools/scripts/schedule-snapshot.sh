#!/usr/bin/env bash
# Writes the schedule (fsdp-translate --fsdp-to-schedule) and the plan report
# of a fixed matrix of models x pipeline options into OUT_DIR, one file each,
# so that a refactoring of the compiler can be checked to change no byte:
#   bash tools/scripts/schedule-snapshot.sh /tmp/before   # on the old commit
#   bash tools/scripts/schedule-snapshot.sh /tmp/after    # on the new one
#   diff -r /tmp/before /tmp/after && echo byte-identical
# BIN (default build/bin) names the tools to use.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: schedule-snapshot.sh OUT_DIR}
bin=${BIN:-build/bin}
mkdir -p "$out"
# A fixed path, so that locations and diagnostics (which name the input)
# compare equal; concurrent runs take turns on it.
tmp=/tmp/fsdp-schedule-snapshot-inputs
exec 9> /tmp/fsdp-schedule-snapshot.lock
flock 9
rm -rf "$tmp" && mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
models=test/lit/Inputs/models
"$bin/fsdp-import" $models/gpt2.json --layers 2 --hidden 32 --heads 4 --vocab 256 --seq 16 --batch 12 -o "$tmp/gpt2.mlir"
"$bin/fsdp-import" $models/llama-3.2-1b.json --layers 2 --hidden 32 --heads 4 --kv-heads 2 --intermediate 64 --vocab 256 --seq 16 --batch 12 -o "$tmp/llama.mlir"
"$bin/fsdp-import" $models/llama-3.2-1b.json --layers 2 --hidden 32 --heads 4 --kv-heads 2 --intermediate 64 --vocab 256 --seq 16 --batch 12 --dtype f64 -o "$tmp/llama64.mlir"
"$bin/fsdp-import" test/lit/Inputs/configs/qwen2-tiny.json --seq 16 --batch 12 -o "$tmp/qwen2.mlir"
"$bin/fsdp-import" $models/llama-3.1-8b.json --seq 1024 --batch 16 -o "$tmp/llama8b.mlir"
cp test/examples/mlp.mlir "$tmp/mlp.mlir"
cp test/lit/Inputs/tiny.mlir "$tmp/tiny.mlir"
configs=(
  "world-size=1"
  "world-size=2"
  "world-size=3"
  "world-size=4 policy=block"
  "world-size=4 policy=block strategy=shard-grad-op"
  "world-size=4 policy=block strategy=shard-optimizer"
  "world-size=4 policy=block strategy=no-shard"
  "world-size=4 policy=block strategy=hybrid-shard shard-size=2"
  "world-size=4 policy=block param-dtype=bf16"
  "world-size=4 policy=block param-dtype=bf16 master-weights=separate"
  "world-size=4 policy=block param-dtype=bf16 reduce-dtype=bf16 master-weights=separate strategy=hybrid-shard shard-size=2"
  "world-size=4 policy=block param-dtype=f16 reduce-dtype=f32 master-weights=separate strategy=no-shard"
  "world-size=2 policy=block micro-batches=2"
  "world-size=2 policy=block strategy=no-shard micro-batches=2"
  "world-size=4 policy=block bucket-bytes=16384"
  "world-size=3 policy=block strategy=shard-optimizer bucket-bytes=200000"
  "world-size=4 policy=block prefetch=none"
  "world-size=4 policy=block prefetch=fsdp1"
  "world-size=4 policy=block prefetch=auto"
  "world-size=4 policy=size min-unit-numel=2000"
  "world-size=2 policy=block optimizer=sgd lr=0.5 weight-decay=0"
  "world-size=2 policy=block lr=2e-3"
  "world-size=4 policy=block frozen=*norm*"
)
i=0
for m in mlp tiny gpt2 llama llama64 qwen2; do
  for c in "${configs[@]}"; do
    i=$((i + 1))
    name="$m-$(echo "$c" | sed 's/ /_/g; s/=/-/g; s/\*/x/g; s/,/./g')"
    if "$bin/fsdp-opt" "$tmp/$m.mlir" --fsdp-pipeline="$c report=$out/$name.report.json" -o "$tmp/s.mlir" 2> "$out/$name.err"; then
      "$bin/fsdp-translate" "$tmp/s.mlir" --fsdp-to-schedule -o "$out/$name.json"
      rm -f "$out/$name.err"
    fi
  done
done
for c in "world-size=8 policy=block param-dtype=bf16" "world-size=8 policy=block prefetch=auto param-dtype=bf16" "world-size=16 policy=block strategy=hybrid-shard shard-size=8"; do
  name="llama8b-$(echo "$c" | sed 's/ /_/g; s/=/-/g; s/\*/x/g; s/,/./g')"
  "$bin/fsdp-opt" "$tmp/llama8b.mlir" --fsdp-pipeline="$c report=$out/$name.report.json" -o "$tmp/s.mlir"
  "$bin/fsdp-translate" "$tmp/s.mlir" --fsdp-to-schedule -o "$out/$name.json"
done
echo "schedule-snapshot: $(ls "$out" | wc -l) files in $out"
