#!/usr/bin/env bash
# The architect's sweep of bench/README.md ("Architect's sweep"): fsdp-sweep on
# Llama-3.1-70B and Llama-3.1-405B on DGX H100 nodes (bench/clusters/h100-sxm-8.json),
# sequence 8192, one sequence per rank, bf16, every strategy at 8 to 16384 ranks,
# one unit per block and two larger unit sizes; then 70B at sequence 2048 (one
# unit per block), where some plans fit. Prints each table (as fsdp-sweep does,
# with its wall time) in a markdown code block and writes the rows with their full
# reports to $BUILD/bench/sweep-<model>-<seq>.json. Not a test: the wall times
# depend on the machine; the predictions do not.
#
# Usage: bench/sweep.sh        BUILD=dir (default build), CLUSTER=spec.json, JOBS=N
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CLUSTER=${CLUSTER:-bench/clusters/h100-sxm-8.json}
out=$BUILD/bench
mkdir -p "$out"

# sweep MODEL SEQ [UNIT-NUMEL-LIST]
sweep() {
  echo "### $1, sequence $2"
  echo
  echo '```'
  "$BUILD/bin/fsdp-sweep" "test/lit/Inputs/models/$1.json" --cluster "$CLUSTER" \
    --world-sizes 8,64,512,4096,16384 --seq "$2" --micro-batch 1 --param-dtype bf16 \
    ${3:+--unit-numel "$3"} ${JOBS:+--jobs "$JOBS"} --json "$out/sweep-$1-$2.json"
  echo '```'
  echo
}

# Larger units than a block: about 4 and 14 blocks of 70B (0.86e9 parameters
# each), 4 and 16 blocks of 405B (3.2e9 each).
sweep llama-3.1-70b 8192 3e9,12e9
sweep llama-3.1-405b 8192 12e9,50e9
sweep llama-3.1-70b 2048
