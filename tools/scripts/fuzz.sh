#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers a user feeds fsdp-run: the JSON
# schedule loader and the safetensors reader (test/fuzz/Fuzz*.cpp), with
# Debian's clang 14 libFuzzer, AddressSanitizer and UBSan. Each target
# starts from its committed corpus (test/fuzz/corpus/<target>) and writes
# new inputs to build-fuzz/corpus/<target>, crashes to build-fuzz/crash-*.
# Not part of the tests (ctest replays the committed corpus in seconds).
#
#   tools/scripts/fuzz.sh [SECONDS per target, default 600] [TARGET...]
#
# Needs clang-14 and libclang-rt-14-dev (apt-get install clang-14
# libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER=${1:-600}; shift || true
TARGETS=${*:-schedule safetensors}
out=build-fuzz
mkdir -p "$out"
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iinclude -Iruntime/include -Iruntime/lib -Itools/fsdp-run
       -I/usr/include/x86_64-linux-gnu/openblas-pthread
       $(mpicc --showme:compile) -DOMPI_SKIP_MPICXX=1)
runtime=(runtime/lib/*.cpp runtime/lib/cpu/*.cpp runtime/lib/mpi/*.cpp)
for t in $TARGETS; do
  case $t in
    schedule) src=(test/fuzz/FuzzSchedule.cpp) ;;
    safetensors) src=(test/fuzz/FuzzSafeTensors.cpp tools/fsdp-run/SafeTensors.cpp) ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  clang++-14 "${flags[@]}" "${src[@]}" "${runtime[@]}" -o "$out/fuzz-$t" \
    $(mpicc --showme:link) -lopenblas -ldl -lpthread
  mkdir -p "$out/corpus/$t"
  (cd "$out" && ASAN_OPTIONS=detect_leaks=0 ./fuzz-$t -max_total_time="$SECONDS_PER" \
     -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
     "corpus/$t" "../test/fuzz/corpus/$t" 2>&1 | tail -25) | tee "$out/$t.log"
done
