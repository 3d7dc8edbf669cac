#!/usr/bin/env bash
# Prepares bench/gpu/check.sh for a lent GPU machine (the device tool's
# nvidia-h200: CUDA, CMake, ninja and PyTorch, but no MLIR, no OpenMPI, no
# OpenBLAS and no package registry). Run here, after tools/scripts/build.sh
# (with the cuda driver: nvcc must have been found), from the repository
# root. Writes .fsdp-gpu/ (ignored by git; name it in the device call's
# `carry`):
#   bin/   fsdp-run, fsdp-runtime-tests, fsdp-device-rates (built here,
#          sm_80/90)
#   lib/   libfsdp_cuda.so
#   debs/  the Debian packages of Open MPI, OpenBLAS and what they need
#          (bench/gpu/carry.sh packages: the DT_NEEDED closure, libmunge2
#          for libpmix.so.2 included), unpacked there by check.sh with
#          carry.sh unpack into /opt/fsdp-deps (not into /) and checked
#          with ldd before anything runs
#   sched/ the Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16,
#          world size 1) compiled here, and the planner's report of it on
#          the H200 spec (bench/clusters/h200-8.json) with its simulated
#          timeline (llama8b-2l.trace.json: section 9's per-op times); its
#          compiled step
#          (fsdp-compile: llama8b-2l.so) and a tiny GPT-2's schedule and
#          compiled step (gpt2-tiny.json, gpt2-tiny.so), for fsdp-run
#          --compiled on the cuda driver (the .so calls the runtime's C API,
#          which dispatches to the device's driver); for section 7 the
#          block stack at tp=2 on 2 ranks (llama8b-2l-tp2.json and its
#          report) and a tiny f64 GPT-2 at world size 1 and at (dp, tp) =
#          (2, 2) (gpt2-f64-ref.json, gpt2-f64-tp2x2.json); for section 8
#          a tiny untied f64 GPT-2 at world size 1 and at pp=2 (1f1b, 4
#          micro-batches both), its schedule and compiled step
#          (gpt2-pp-ref.json, gpt2-pp2.json, gpt2-pp2.so)
# Usage: bash bench/gpu/prepare.sh        (about 14 MiB)
#        bash bench/gpu/prepare.sh --dry-run DIR
#   --dry-run: the same tree in DIR for check.sh --dry-run on this machine:
#   the packages assembled from this machine's installed copies (no
#   download) into DIR/prefix, and a tiny Llama (1 layer, hidden 64, seq 16,
#   f32) in place of the 8B-shaped block stack, under the same names.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${FSDP_BUILD_DIR:-build}/bin # the build tree (ctest passes its own)
G=.fsdp-gpu DRY=
if [ "${1:-}" = --dry-run ]; then
  [ $# -eq 2 ] || { echo "usage: prepare.sh [--dry-run DIR]" >&2; exit 2; }
  G=$2 DRY=1
elif [ $# -gt 0 ]; then
  echo "usage: prepare.sh [--dry-run DIR]" >&2
  exit 2
fi
for t in fsdp-run fsdp-runtime-tests fsdp-device-rates fsdp-import fsdp-opt fsdp-translate fsdp-compile; do
  [ -x $B/$t ] || { echo "prepare.sh: $B/$t missing: run tools/scripts/build.sh first" >&2; exit 1; }
done
if [ -z "$DRY" ]; then
  [ -f $B/../lib/libfsdp_cuda.so ] || { echo "prepare.sh: build/lib/libfsdp_cuda.so missing (build with FSDP_ENABLE_CUDA=ON)" >&2; exit 1; }
  grep -qx '/.fsdp-gpu/' .git/info/exclude 2>/dev/null || echo '/.fsdp-gpu/' >> .git/info/exclude
fi
rm -rf "$G" && mkdir -p "$G"/bin "$G"/lib "$G"/debs "$G"/sched
cp $B/fsdp-run $B/fsdp-runtime-tests $B/fsdp-device-rates "$G"/bin/
[ -f $B/../lib/libfsdp_cuda.so ] && cp $B/../lib/libfsdp_cuda.so "$G"/lib/
if [ -n "$DRY" ]; then
  bash bench/gpu/carry.sh assemble "$G"/prefix
else
  (cd "$G"/debs && apt-get download -q $(bash "$OLDPWD"/bench/gpu/carry.sh packages) 2>&1 |
    grep -v "unsandboxed" || true)
  n=$(ls "$G"/debs/*.deb | wc -l)
  [ "$n" -eq "$(bash bench/gpu/carry.sh packages | wc -w)" ] ||
    { echo "prepare.sh: downloaded $n of the packages: $(bash bench/gpu/carry.sh packages)" >&2; exit 1; }
fi
S=$G/sched
if [ -n "$DRY" ]; then
  $B/fsdp-import test/lit/Inputs/models/llama-3.1-8b.json --layers 1 --hidden 64 --heads 4 \
    --kv-heads 2 --intermediate 128 --vocab 256 --seq 16 --batch 1 -o $S/llama8b-2l.mlir
  PIPE="world-size=1 policy=block cluster=bench/clusters/h200-8.json report=$S/llama8b-2l.report.json trace=$S/llama8b-2l.trace.json"
else
  $B/fsdp-import test/lit/Inputs/models/llama-3.1-8b.json --layers 2 --seq 2048 --batch 1 \
    -o $S/llama8b-2l.mlir
  PIPE="world-size=1 policy=block param-dtype=bf16 cluster=bench/clusters/h200-8.json report=$S/llama8b-2l.report.json trace=$S/llama8b-2l.trace.json"
fi
$B/fsdp-opt $S/llama8b-2l.mlir --fsdp-pipeline="$PIPE" -o $S/llama8b-2l.sharded.mlir
$B/fsdp-translate $S/llama8b-2l.sharded.mlir --fsdp-to-schedule -o $S/llama8b-2l.json
$B/fsdp-compile $S/llama8b-2l.sharded.mlir -o $S/llama8b-2l.so
# Section 7 (tensor parallelism): the same block stack planned with tp=2 on
# 2 ranks (its own report), and a tiny GPT-2 in f64 at (dp, tp) = (2, 2)
# beside its 1-rank reference (the options of test/lit/Integration/
# tensor-parallel.test).
PIPE_TP=${PIPE/world-size=1/world-size=2 tp=2}
PIPE_TP=${PIPE_TP/llama8b-2l.report.json/llama8b-2l-tp2.report.json}
PIPE_TP=${PIPE_TP/ trace=*/}
$B/fsdp-opt $S/llama8b-2l.mlir --fsdp-pipeline="$PIPE_TP" -o $S/llama8b-2l-tp2.sharded.mlir
$B/fsdp-translate $S/llama8b-2l-tp2.sharded.mlir --fsdp-to-schedule -o $S/llama8b-2l-tp2.json
$B/fsdp-import test/lit/Inputs/models/gpt2.json --layers 2 --hidden 32 --heads 4 --vocab 256 \
  --seq 16 --batch 8 --dtype f64 -o $S/gpt2-f64.mlir
TPO="policy=block micro-batches=2 max-grad-norm=0.1 lr=1e-2 lr-schedule=cosine warmup-steps=1 decay-steps=3"
$B/fsdp-opt $S/gpt2-f64.mlir --fsdp-pipeline="world-size=1 $TPO" -o $S/gpt2-f64-ref.sharded.mlir
$B/fsdp-translate $S/gpt2-f64-ref.sharded.mlir --fsdp-to-schedule -o $S/gpt2-f64-ref.json
$B/fsdp-opt $S/gpt2-f64.mlir --fsdp-pipeline="world-size=4 tp=2 $TPO" -o $S/gpt2-f64-tp2x2.sharded.mlir
$B/fsdp-translate $S/gpt2-f64-tp2x2.sharded.mlir --fsdp-to-schedule -o $S/gpt2-f64-tp2x2.json
# Section 8: pipeline parallelism (the options of test/lit/Integration/
# pipeline-parallel.test; tied weights across stages are refused).
$B/fsdp-import test/lit/Inputs/models/gpt2-untied.json --layers 4 --hidden 32 --heads 4 \
  --vocab 256 --seq 16 --batch 8 --dtype f64 -o $S/gpt2-pp.mlir
PPO="policy=block micro-batches=4 lr=1e-2 lr-schedule=cosine warmup-steps=1 decay-steps=3"
$B/fsdp-opt $S/gpt2-pp.mlir --fsdp-pipeline="world-size=1 $PPO" -o $S/gpt2-pp-ref.sharded.mlir
$B/fsdp-translate $S/gpt2-pp-ref.sharded.mlir --fsdp-to-schedule -o $S/gpt2-pp-ref.json
$B/fsdp-opt $S/gpt2-pp.mlir --fsdp-pipeline="world-size=2 pp=2 pp-schedule=1f1b $PPO" \
  -o $S/gpt2-pp2.sharded.mlir
$B/fsdp-translate $S/gpt2-pp2.sharded.mlir --fsdp-to-schedule -o $S/gpt2-pp2.json
$B/fsdp-compile $S/gpt2-pp2.sharded.mlir -o $S/gpt2-pp2.so
$B/fsdp-import test/lit/Inputs/models/gpt2.json --layers 2 --hidden 32 --heads 4 --vocab 256 \
  --seq 16 --batch 4 -o $S/gpt2-tiny.mlir
$B/fsdp-opt $S/gpt2-tiny.mlir --fsdp-pipeline="world-size=1 policy=block" \
  -o $S/gpt2-tiny.sharded.mlir
$B/fsdp-translate $S/gpt2-tiny.sharded.mlir --fsdp-to-schedule -o $S/gpt2-tiny.json
$B/fsdp-compile $S/gpt2-tiny.sharded.mlir -o $S/gpt2-tiny.so
du -sh "$G"
[ -n "$DRY" ] || echo "prepare.sh: carry .fsdp-gpu and run: bash bench/gpu/check.sh (results in \$OUT/gpu-check.txt)"
