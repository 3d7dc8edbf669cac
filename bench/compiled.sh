#!/usr/bin/env bash
# Interpreted vs compiled training steps (fsdp-run SCHEDULE.json vs
# fsdp-run --compiled STEP.so of the same scheduled IR): per-step time on a
# deep thin model where the per-instruction dispatch dominates (tiny GPT-2,
# 48 layers, hidden 32: about 2,900 instructions a step on tensors of a few
# KiB) at 1 and 2 ranks, and on the main job (tools/scripts/run-main.sh's
# model) at 4 ranks; then the time fsdp-compile takes for the real gpt2 and
# llama-3.1-8b configs planned for 8 ranks.
#
# Each configuration runs REPEATS times per path, alternating interpreted and
# compiled runs so that both see the same machine load; a run's figure is
# fsdp-run's step_time_s (median over its timed steps of the max over ranks);
# the table gives the median and the minimum over repeats of each path, the
# ratio of the medians and the median of the per-pair ratios (a pair's two
# runs are adjacent in time, so they see nearly the same load), and the
# interpreter's own time per step from --profile ("(interpreter)": binding
# buffers, bookkeeping, progress tests; a separate run), which is what a
# compiled step can save at most. Not a test: the numbers depend on the
# machine. Writes markdown to stdout.
#
# Usage: bench/compiled.sh [REPEATS] [STEPS] [CONFIGS]
#        (default 7 repeats, 20 steps, "deep:1 deep:2 main:4")
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-7}
STEPS=${2:-20}
CONFIGS=${3:-deep:1 deep:2 main:4}
WARMUP=3
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
out=build/bench/compiled
mkdir -p "$out"
data=test/data/tinyshakespeare.txt
mpirun="mpirun --allow-run-as-root --oversubscribe"

build/bin/fsdp-import test/lit/Inputs/models/gpt2.json --layers 48 --hidden 32 --heads 2 \
  --vocab 256 --seq 16 --batch 4 -o "$out/deep.mlir"
build/bin/fsdp-import test/lit/Inputs/models/gpt2.json --layers 4 --hidden 128 --heads 4 \
  --vocab 256 --seq 64 --batch 16 -o "$out/main.mlir"

echo "| model | ranks | instructions | interpreted step (s): median, min | compiled step (s): median, min | ratio of medians | median of pair ratios | interpreter's own time per step (s) |"
echo "|---|---|---|---|---|---|---|---|"
for cfg in $CONFIGS; do
  m=${cfg%%:*}; n=${cfg##*:}
  base="$out/$m.$n"
  build/bin/fsdp-opt "$out/$m.mlir" \
    --fsdp-pipeline="world-size=$n policy=block lr=1e-3 weight-decay=0.1" -o "$base.mlir"
  build/bin/fsdp-translate "$base.mlir" --fsdp-to-schedule -o "$base.json"
  build/bin/fsdp-compile "$base.mlir" -o "$base.so"
  : > "$base.times"
  for r in $(seq "$REPEATS"); do
    for mode in interpreted compiled; do
      if [ "$mode" = interpreted ]; then step=("$base.json"); else step=(--compiled "$base.so"); fi
      $mpirun -np "$n" build/bin/fsdp-run "${step[@]}" --steps "$STEPS" --warmup "$WARMUP" \
        --seed 0 --data "$data" | tail -1 > "$base.$mode.$r.json"
      python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], s['step_time_s'])" \
        "$base.$mode.$r.json" "$mode" >> "$base.times"
    done
  done
  $mpirun -np "$n" build/bin/fsdp-run "$base.json" --steps "$STEPS" --warmup "$WARMUP" \
    --seed 0 --data "$data" --profile | tail -1 > "$base.profile.json"
  python3 - "$base" "$m" "$n" <<'PY'
import json, statistics, sys
base, m, n = sys.argv[1:]
t = {"interpreted": [], "compiled": []}
for line in open(base + ".times"):
    mode, v = line.split()
    t[mode].append(float(v))
i, c = statistics.median(t["interpreted"]), statistics.median(t["compiled"])
pairs = statistics.median(a / b for a, b in zip(t["interpreted"], t["compiled"]))
prof = json.load(open(base + ".profile.json")).get("profile", {})
own = prof.get("(interpreter)", {}).get("seconds", float("nan"))
ins = len(json.load(open(base + ".json"))["instructions"])
print(f"| {m} | {n} | {ins} | {i:.5f}, {min(t['interpreted']):.5f} | "
      f"{c:.5f}, {min(t['compiled']):.5f} | {i / c:.2f}x | {pairs:.2f}x | {own:.5f} |")
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
