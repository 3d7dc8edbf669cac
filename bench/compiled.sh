#!/usr/bin/env bash
# Interpreted vs compiled training steps (fsdp-run SCHEDULE.json vs
# fsdp-run --compiled STEP.so of the same scheduled IR): per-step time on a
# deep thin model where the per-instruction dispatch dominates (tiny GPT-2,
# 48 layers, hidden 32: about 2,900 instructions a step on tensors of a few
# KiB) at 1 and 2 ranks, the same at batch 1 (deep1: a quarter of the kernel
# work, so dispatch is most of the step), and on the main job (tools/scripts/run-main.sh's
# model) at 4 ranks; then the time fsdp-compile takes for the real gpt2 and
# llama-3.1-8b configs planned for 8 ranks.
#
# Step times come from build/bin/fsdp-step-bench (bench/step_bench.cpp): one
# process per rank holds an interpreting Executor and one bound to STEP.so
# and alternates their steps (I C C I I C ...), so both paths see the same
# machine load; a step's time is the max over ranks of step() plus the loss
# read. The table gives the median and minimum over the timed steps of each
# path, the ratio of the medians and the median of the per-pair ratios, and
# the seconds inside kernel entry points per step (the device's
# compute_seconds, median), the interpreter's own time per step from
# `fsdp-run --profile`
# ("(interpreter)": binding buffers, bookkeeping, progress tests; a separate
# run), the most a compiled step could save. Not a test: the numbers depend on
# the machine. Writes markdown to stdout.
#
# Usage: bench/compiled.sh [STEPS] [CONFIGS]
#        (default 200 steps, "deep:1 deep:2 deep1:1 main:4")
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-200}
CONFIGS=${2:-deep:1 deep:2 deep1:1 main:4}
WARMUP=5
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
out=build/bench/compiled
mkdir -p "$out"
data=test/data/tinyshakespeare.txt
mpirun="mpirun --allow-run-as-root --oversubscribe"

build/bin/fsdp-import test/lit/Inputs/models/gpt2.json --layers 48 --hidden 32 --heads 2 \
  --vocab 256 --seq 16 --batch 4 -o "$out/deep.mlir"
build/bin/fsdp-import test/lit/Inputs/models/gpt2.json --layers 48 --hidden 32 --heads 2 \
  --vocab 256 --seq 16 --batch 1 -o "$out/deep1.mlir"
build/bin/fsdp-import test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 \
  --vocab 256 --seq 64 --batch 16 -o "$out/main.mlir"

echo "| model | ranks | instructions | interpreted step (s): median, min | compiled step (s): median, min | ratio of medians | median of pair ratios | in kernels (s): interpreted, compiled | losses identical | interpreter's own time per step (s) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for cfg in $CONFIGS; do
  m=${cfg%%:*}; n=${cfg##*:}
  base="$out/$m.$n"
  build/bin/fsdp-opt "$out/$m.mlir" \
    --fsdp-pipeline="world-size=$n policy=block lr=1e-3 weight-decay=0.1" -o "$base.mlir"
  build/bin/fsdp-translate "$base.mlir" --fsdp-to-schedule -o "$base.json"
  build/bin/fsdp-compile "$base.mlir" -o "$base.so"
  $mpirun -np "$n" build/bin/fsdp-step-bench "$base.so" "$STEPS" "$WARMUP" > "$base.bench.json"
  $mpirun -np "$n" build/bin/fsdp-run "$base.json" --steps 30 --warmup "$WARMUP" \
    --seed 0 --data "$data" --profile | tail -1 > "$base.profile.json"
  python3 - "$base" "$m" "$n" <<'PY'
import json, sys
base, m, n = sys.argv[1:]
b = json.load(open(base + ".bench.json"))
prof = json.load(open(base + ".profile.json")).get("profile", {})
own = prof.get("(interpreter)", {}).get("seconds", float("nan"))
print(f"| {m} | {n} | {b['instructions']} | {b['interpreted_median_s']:.5f}, {b['interpreted_min_s']:.5f} | "
      f"{b['compiled_median_s']:.5f}, {b['compiled_min_s']:.5f} | {b['ratio_of_medians']:.2f}x | "
      f"{b['median_pair_ratio']:.2f}x | {b['interpreted_kernel_median_s']:.5f}, "
      f"{b['compiled_kernel_median_s']:.5f} | {b['losses_identical']} | {own:.5f} |")
PY
done

echo
echo "| config | ranks | instructions | fsdp-opt (s) | fsdp-compile (s) | of which: convert / translate / codegen / link (s) | STEP.so bytes |"
echo "|---|---|---|---|---|---|---|"
for m in gpt2 llama-3.1-8b; do
  base="$out/$m.8"
  build/bin/fsdp-import "test/lit/Inputs/models/$m.json" --batch 8 -o "$base.in.mlir"
  t0=$(date +%s.%N)
  build/bin/fsdp-opt "$base.in.mlir" --fsdp-pipeline="world-size=8 policy=block" -o "$base.mlir"
  t1=$(date +%s.%N)
  build/bin/fsdp-compile "$base.mlir" -o "$base.so" --time 2> "$base.time"
  t2=$(date +%s.%N)
  build/bin/fsdp-translate "$base.mlir" --fsdp-to-schedule -o "$base.json"
  python3 - "$base" "$m" "$t0" "$t1" "$t2" <<'PY'
import json, os, re, sys
base, m, t0, t1, t2 = sys.argv[1:]
ph = dict(re.findall(r"(\w+) ([0-9.]+) s", open(base + ".time").read()))
ins = len(json.load(open(base + ".json"))["instructions"])
print(f"| {m} | 8 | {ins} | {float(t1) - float(t0):.2f} | {float(t2) - float(t1):.2f} | "
      f"{ph['convert']} / {ph['translate']} / {ph['codegen']} / {ph['link']} | "
      f"{os.path.getsize(base + '.so')} |")
PY
done
