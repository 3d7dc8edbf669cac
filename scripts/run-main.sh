#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, compile the
# example model into a 4-rank fully sharded schedule and train it under mpirun.
# Usage: scripts/run-main.sh [STEPS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-200}
NP=${NP:-4}
bash scripts/setup.sh
bash scripts/build.sh
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p build/main
build/bin/fsdp-opt examples/mlp.mlir \
  --fsdp-pipeline="world-size=$NP optimizer=adamw lr=0.01" --mlir-print-debuginfo \
  -o build/main/mlp.sharded.mlir
build/bin/fsdp-translate build/main/mlp.sharded.mlir --fsdp-to-schedule -o build/main/mlp.schedule.json
mpirun --allow-run-as-root --oversubscribe -np "$NP" \
  build/bin/fsdp-run build/main/mlp.schedule.json --steps "$STEPS" --seed 0
