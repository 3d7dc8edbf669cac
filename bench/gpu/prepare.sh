#!/usr/bin/env bash
# Prepares bench/gpu/check.sh for a lent GPU machine (the device tool's
# nvidia-h200: CUDA, CMake, ninja and PyTorch, but no MLIR, no OpenMPI, no
# OpenBLAS and no package registry). Run here, after tools/scripts/build.sh
# (with the cuda driver: nvcc must have been found), from the repository
# root. Writes .fsdp-gpu/ (ignored by git; name it in the device call's
# `carry`):
#   bin/   fsdp-run, fsdp-runtime-tests        (built here, sm_80/90)
#   lib/   libfsdp_cuda.so
#   debs/  the Debian packages of Open MPI and OpenBLAS the binaries need,
#          unpacked there with dpkg -x into /opt/fsdp-deps (not into /)
#   sched/ the Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16,
#          world size 1) compiled here, and the planner's report of it on
#          the H200 spec (bench/clusters/h200-8.json); its compiled step
#          (fsdp-compile: llama8b-2l.so) and a tiny GPT-2's schedule and
#          compiled step (gpt2-tiny.json, gpt2-tiny.so), for fsdp-run
#          --compiled on the cuda driver (the .so calls the runtime's C API,
#          which dispatches to the device's driver)
# Usage: bash bench/gpu/prepare.sh        (about 12 MiB)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build/bin
[ -f build/lib/libfsdp_cuda.so ] || { echo "prepare.sh: build/lib/libfsdp_cuda.so missing (build with FSDP_ENABLE_CUDA=ON)" >&2; exit 1; }
grep -qx '/.fsdp-gpu/' .git/info/exclude 2>/dev/null || echo '/.fsdp-gpu/' >> .git/info/exclude
rm -rf .fsdp-gpu && mkdir -p .fsdp-gpu/bin .fsdp-gpu/lib .fsdp-gpu/debs .fsdp-gpu/sched
cp $B/fsdp-run $B/fsdp-runtime-tests .fsdp-gpu/bin/
cp build/lib/libfsdp_cuda.so .fsdp-gpu/lib/
(cd .fsdp-gpu/debs && apt-get download -q \
  libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libpmix2 libopenblas0-pthread libopenblas0 \
  libgfortran5 libquadmath0 2>&1 | grep -v "unsandboxed" || true)
$B/fsdp-import test/lit/Inputs/models/llama-3.1-8b.json --layers 2 --seq 2048 --batch 1 \
  -o .fsdp-gpu/sched/llama8b-2l.mlir
$B/fsdp-opt .fsdp-gpu/sched/llama8b-2l.mlir \
  --fsdp-pipeline="world-size=1 policy=block param-dtype=bf16 cluster=bench/clusters/h200-8.json report=.fsdp-gpu/sched/llama8b-2l.report.json" \
  -o .fsdp-gpu/sched/llama8b-2l.sharded.mlir
$B/fsdp-translate .fsdp-gpu/sched/llama8b-2l.sharded.mlir --fsdp-to-schedule -o .fsdp-gpu/sched/llama8b-2l.json
$B/fsdp-compile .fsdp-gpu/sched/llama8b-2l.sharded.mlir -o .fsdp-gpu/sched/llama8b-2l.so
$B/fsdp-import test/lit/Inputs/models/gpt2.json --layers 2 --hidden 32 --heads 4 --vocab 256 \
  --seq 16 --batch 4 -o .fsdp-gpu/sched/gpt2-tiny.mlir
$B/fsdp-opt .fsdp-gpu/sched/gpt2-tiny.mlir --fsdp-pipeline="world-size=1 policy=block" \
  -o .fsdp-gpu/sched/gpt2-tiny.sharded.mlir
$B/fsdp-translate .fsdp-gpu/sched/gpt2-tiny.sharded.mlir --fsdp-to-schedule -o .fsdp-gpu/sched/gpt2-tiny.json
$B/fsdp-compile .fsdp-gpu/sched/gpt2-tiny.sharded.mlir -o .fsdp-gpu/sched/gpt2-tiny.so
du -sh .fsdp-gpu
echo "prepare.sh: carry .fsdp-gpu and run: bash bench/gpu/check.sh (results in \$OUT/gpu-check.txt)"
