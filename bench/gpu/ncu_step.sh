#!/usr/bin/env bash
# Every kernel of one training step of check.sh section 5's block stack
# (Llama-3.1-8B-shaped, 2 layers, seq 2048, bf16) timed by Nsight Compute on
# the lent GPU: per kernel its duration (gpu__time_duration.sum) and the
# DRAM bytes it read and wrote, with no synchronisation between ops (fsdp-run
# --profile waits after each op, which adds the launch and wait to each).
# Run there from the repository root with .fsdp-gpu carried (prepare.sh),
# after nothing else: it unpacks the carried packages itself.
#   bash bench/gpu/ncu_step.sh          -> $OUT/ncu-step.csv, ncu-step.err
# Summarise here: python3 bench/gpu/ncu_summary.py ncu-step.csv
# Clocks and caches as the step leaves them (--clock-control none,
# --cache-control none; ncu's defaults lock the base clock and flush the
# caches before each kernel). It times the first step (--steps 1).
# ncu replays each kernel once per pass (these metrics: one pass), so the
# run takes tens of seconds; the init kernels of the parameters are in the
# CSV too (ncu_summary.py keeps the kernels after the last init_values).
set -uo pipefail
cd "$(dirname "$0")/../.."
O=${OUT:-$PWD/ncu-out}
mkdir -p "$O"
G=.fsdp-gpu P=/opt/fsdp-deps
bash bench/gpu/carry.sh unpack $G/debs $P > "$O/ncu-unpack.txt" 2>&1 || { cat "$O/ncu-unpack.txt"; exit 1; }
eval "$(bash bench/gpu/carry.sh env $P)"
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 FSDP_CUDA_DRIVER=$PWD/$G/lib/libfsdp_cuda.so
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 150 "$NCU" --target-processes all --clock-control none --cache-control none \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw \
  "$OPAL_PREFIX/bin/orterun" --oversubscribe -np 1 $G/bin/fsdp-run $G/sched/llama8b-2l.json \
  --device cuda --steps 1 > "$O/ncu-step.csv" 2> "$O/ncu-step.err"
rc=$?
tail -n 5 "$O/ncu-step.err"
wc -l "$O/ncu-step.csv"
exit $rc
