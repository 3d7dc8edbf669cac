#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers a user feeds the tools: the JSON
# schedule loader, the safetensors reader and the checkpoint index of
# fsdp-run (clang 14), the
# Hugging Face config importer and the cluster spec reader of the compiler
# (clang 22, against MLIR 22 and the g++ build in build/: only the parser's
# own sources are instrumented) -- test/fuzz/Fuzz*.cpp -- with libFuzzer,
# AddressSanitizer and UBSan. Each target
# starts from its committed corpus (test/fuzz/corpus/<target>) and writes
# new inputs to build-fuzz/corpus/<target>, crashes to build-fuzz/crash-*.
# Not part of the tests (ctest replays the committed corpus in seconds).
#
#   tools/scripts/fuzz.sh [SECONDS per target, default 600] [TARGET...]
#
# Needs clang-14, libclang-rt-14-dev, clang-22 and libclang-rt-22-dev
# (apt-get install ...), and for config/cluster a build in build/
# (tools/scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER=${1:-600}; shift || true
TARGETS=${*:-schedule safetensors checkpoint config cluster}
out=build-fuzz
mkdir -p "$out"
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iinclude -Iruntime/include -Iruntime/lib -Iruntime/tooling
       -I/usr/include/x86_64-linux-gnu/openblas-pthread
       $(mpicc --showme:compile) -DOMPI_SKIP_MPICXX=1)
runtime=(runtime/schedule/*.cpp runtime/schedule/ops/*.cpp runtime/lib/*.cpp runtime/lib/cpu/*.cpp
         runtime/lib/mpi/*.cpp)
# The compiler's link libraries, as CMake wrote them for a tool (minus the
# tool's own objects and the libraries whose sources are rebuilt here).
linklibs() {
  grep -A8 "^build bin/$1:" build/build.ninja | sed -n 's/^ *LINK_LIBRARIES = //p' |
    sed -e 's/-Wl,-rpath,[^ ]*//' -e "s#\(lib/libFSDP[A-Za-z]*\.a\)#build/\1#g"
}
mlirflags=(-std=gnu++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
           -fno-exceptions -funwind-tables -fno-sanitize=vptr
           -D_GLIBCXX_USE_CXX11_ABI=1 -D__STDC_CONSTANT_MACROS -D__STDC_FORMAT_MACROS
           -D__STDC_LIMIT_MACROS -Iinclude -Ibuild/include -Idialects -Ibuild/dialects
           -isystem /usr/lib/llvm-22/include)
for t in $TARGETS; do
  case $t in
    schedule) src=(test/fuzz/FuzzSchedule.cpp) ;;
    safetensors) src=(test/fuzz/FuzzSafeTensors.cpp runtime/tooling/SafeTensors.cpp) ;;
    checkpoint) src=(test/fuzz/FuzzCheckpointIndex.cpp runtime/tooling/Checkpoint.cpp) ;;
    config|cluster) ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  case $t in
    schedule|safetensors|checkpoint)
      clang++-14 "${flags[@]}" "${src[@]}" "${runtime[@]}" -o "$out/fuzz-$t" \
        $(mpicc --showme:link) -lopenblas -lz -ldl -lpthread ;;
    config)
      clang++-22 "${mlirflags[@]}" test/fuzz/FuzzConfig.cpp lib/Import/*.cpp -o "$out/fuzz-$t" \
        -fuse-ld=lld $(linklibs fsdp-import | sed 's#build/lib/libFSDPImport.a##') \
        -Wl,-rpath,/usr/lib/llvm-22/lib ;;
    cluster)
      clang++-22 "${mlirflags[@]}" test/fuzz/FuzzCluster.cpp lib/Analysis/Simulator.cpp \
        -o "$out/fuzz-$t" -fuse-ld=lld $(linklibs fsdp-sweep) -Wl,-rpath,/usr/lib/llvm-22/lib ;;
  esac
  # Seeds: the committed corpus and the project's fixtures of the format
  # (the directories test/fuzz/CMakeLists.txt replays beside the corpus).
  case $t in
    schedule) seeds=(../test/unit/schedules) ;;
    config) seeds=(../test/lit/Inputs/configs ../test/lit/Inputs/models) ;;
    cluster) seeds=(../bench/clusters) ;;
    *) seeds=() ;;
  esac
  mkdir -p "$out/corpus/$t"
  (cd "$out" && ASAN_OPTIONS=detect_leaks=0 ./fuzz-$t -max_total_time="$SECONDS_PER" \
     -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
     "corpus/$t" "../test/fuzz/corpus/$t" "${seeds[@]}" 2>&1 | tail -25) | tee "$out/$t.log"
done
