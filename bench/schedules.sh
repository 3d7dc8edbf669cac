#!/usr/bin/env bash
# The overlap scheduler's checks on simulated H100 clusters (bench/README.md,
# "Overlap scheduling"): Llama-3.1-8B at 8 and 64 ranks and Llama-3.1-70B at
# 64 and 512 ranks, one unit per block, bf16, one sequence per rank, each
# prefetch mode; prints a markdown table (predicted step, lower bound, their
# ratio, exposed communication, planned peak, MFU, planning wall time).
# Usage: bench/schedules.sh [build dir]   (after tools/scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/bin
SPEC=bench/clusters/h100-sxm-8.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "| model | ranks | tokens/rank | prefetch | schedule applied | step s | lower bound s | step/bound | exposed comm s | peak GiB | fits 80 GB | MFU | plan wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for cfg in "llama-3.1-8b 8 8192" "llama-3.1-8b 64 8192" "llama-3.1-70b 64 2048" "llama-3.1-70b 512 2048" "llama-3.1-70b 64 8192"; do
  set -- $cfg
  "$BIN/fsdp-import" "test/lit/Inputs/models/$1.json" --batch "$2" --seq "$3" -o "$T/m.mlir"
  for pf in none fsdp1 fsdp2 auto; do
    t0=$(date +%s.%N)
    "$BIN/fsdp-opt" "$T/m.mlir" --fsdp-pipeline="world-size=$2 policy=block param-dtype=bf16 prefetch=$pf cluster=$SPEC report=$T/r.json" -o /dev/null
    t1=$(date +%s.%N)
    python3 - "$T/r.json" "$1" "$2" "$3" "$pf" "$(echo "$t1 - $t0" | bc)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
model, ranks, tokens, pf, wall = sys.argv[2:]
peak = r["per_rank"]["peak_bytes"]
print(f"| {model} | {ranks} | {tokens} | {pf} | {r['schedule']} | {r['predicted_step_time_s']:.4f} | "
      f"{r['lower_bound_s']:.4f} | {r['step_over_lower_bound']:.4f} | {r['exposed_comm_s']:.4f} | "
      f"{peak / 2**30:.2f} | {'yes' if peak <= 80e9 else 'NO'} | {r['mfu']:.3f} | {float(wall):.2f} |")
PY
  done
done
echo
echo "| model | ranks | units | bucket-bytes | schedule applied | collectives | step s | comm s | step/bound | peak GiB | plan wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
"$BIN/fsdp-import" test/lit/Inputs/models/gpt2.json --batch 64 --seq 1024 -o "$T/g.mlir"
for b in 0 8000000 32000000 128000000; do
  t0=$(date +%s.%N)
  "$BIN/fsdp-opt" "$T/g.mlir" --fsdp-pipeline="world-size=64 policy=module param-dtype=bf16 bucket-bytes=$b cluster=$SPEC report=$T/r.json" -o "$T/g-s.mlir"
  t1=$(date +%s.%N)
  n=$(grep -cE "fsdp\.(all_gather|reduce_scatter) .* async" "$T/g-s.mlir")
  python3 - "$T/r.json" "$b" "$n" "$(echo "$t1 - $t0" | bc)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b, n, wall = sys.argv[2:]
print(f"| gpt2 (124M), 1024 tokens/rank | 64 | {len(r['units'])} (policy=module) | {b} | {r['schedule']} | {n} | "
      f"{r['predicted_step_time_s']:.4f} | {r['comm_s']:.4f} | {r['step_over_lower_bound']:.4f} | "
      f"{r['per_rank']['peak_bytes'] / 2**30:.2f} | {float(wall):.2f} |")
PY
done
