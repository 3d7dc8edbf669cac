#!/usr/bin/env bash
# ctest gpu-check-dry-run: bench/gpu/check.sh --dry-run on this machine
# (prepare.sh --dry-run's tree, the cpu driver standing in for cuda), then
# its argument handling. Checks that every section printed its result line,
# that the carried tree passed ldd (section 0), that the runs' JSON
# summaries were read from stdout alone (section 5's step time, section
# 6's bit-identical compiled vs interpreted tiny GPT-2, section 7's TP 2 x
# FSDP 2 equality and tp=2 step time), that everything was
# written under $OUT, and that bad arguments exit 2 with a message.
# usage: check_dry_run_test.sh OUT_DIR     (exit 77: skipped, with why)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
O=$1
fail() { echo "gpu-check-dry-run: FAIL: $*"; exit 1; }
command -v dpkg > /dev/null || { echo "skipped: no dpkg"; exit 77; }
for p in $(bash "$here/carry.sh" packages); do
  dpkg -s "$p" > /dev/null 2>&1 || { echo "skipped: package $p is not installed here"; exit 77; }
done
B=${FSDP_BUILD_DIR:-$here/../../build}/bin
for t in fsdp-run fsdp-runtime-tests fsdp-device-rates fsdp-import fsdp-opt fsdp-translate fsdp-compile; do
  [ -x "$B/$t" ] || { echo "skipped: $B/$t is not built (the compiler needs MLIR)"; exit 77; }
done
rm -rf "$O" && mkdir -p "$O"
t0=$(date +%s)
OUT=$O bash "$here/check.sh" --dry-run > "$O/stdout.txt" 2> "$O/stderr.txt"
rc=$?
cat "$O/stdout.txt"
[ $rc = 0 ] || fail "check.sh --dry-run exited $rc; stderr: $(tail -n 5 "$O/stderr.txt")"
for n in 0 1 2 3 4 5 6 7 8 9; do
  grep -qE "^== $n\. .*: (PASS|SKIPPED)" "$O/stdout.txt" || fail "no result line for section $n"
done
grep -qE "^== 0\. .*: PASS .*nothing missing" "$O/stdout.txt" || fail "section 0 did not pass ldd"
grep -q "^step time [0-9.]* s (median of 8)" "$O/stdout.txt" || fail "section 5 read no step time"
grep -q "parameters and moments bit-identical" "$O/stdout.txt" || fail "section 6: compiled vs interpreted"
grep -qE "^tiny GPT-2 f64, \(dp, tp\) = \(2, 2\) vs 1 rank, tol 1e-12: world size 4 vs 1: .* OK" "$O/stdout.txt" ||
  fail "section 7: TP 2 x FSDP 2 vs 1 rank"
grep -q "^block stack at tp=2 on 2 ranks sharing the GPU: step time [0-9.]* s (median of 8)" "$O/stdout.txt" ||
  fail "section 7 read no tp=2 step time"
grep -q "^K sweep fit 1/eff" "$O/stdout.txt" || fail "section 9 fitted no GEMM K sweep"
grep -q "^per-op seconds per step, measured" "$O/stdout.txt" || fail "section 9 printed no per-op table"
grep -q "run failed" "$O/stdout.txt" && fail "a run's summary was not read"
# gpu-check.txt: what was printed, plus the commands ("$ ...").
grep -v '^\$ ' "$O/gpu-check.txt" | cmp -s - "$O/stdout.txt" || fail "gpu-check.txt is not what was printed"
grep -q '^\$ .*fsdp-run .*llama8b-2l.json' "$O/gpu-check.txt" || fail "gpu-check.txt lacks the commands"
for f in l8.out l8.err l8pb.out ti.json tc.json ldd.out tp4.json l8tp.out; do
  [ -f "$O/$f" ] || fail "$f was not written under \$OUT"
done
echo "dry run: $(($(date +%s) - t0)) s"

# Argument handling: usage errors exit 2 and say why; a spent budget skips
# a section with its line.
for bad in "--bogus" "--sections 10" "--sections 1,x" "--budget x" "--sections"; do
  out=$(OUT=$O/args bash "$here/check.sh" $bad 2>&1)
  r=$?
  [ $r = 2 ] || fail "check.sh $bad exited $r"
  grep -q "usage: bash bench/gpu/check.sh" <<<"$out" || fail "check.sh $bad printed no usage: $out"
done
out=$(OUT=$O/budget bash "$here/check.sh" --dry-run --budget 0 --sections 0,1 2>&1)
grep -q "^== 1\. machine: SKIPPED (the budget of 0 s is spent" <<<"$out" ||
  fail "--budget 0 did not skip section 1: $out"
echo "gpu-check-dry-run: OK"
