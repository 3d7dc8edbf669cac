#!/usr/bin/env bash
# Configures and builds fsdp-opt (compiler, runtime, tools, tests) into build/.
# Usage: tools/scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${JOBS:-2}
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "$@"
fi
ninja -C build -j "$JOBS"
