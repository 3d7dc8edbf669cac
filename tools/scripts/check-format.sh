#!/usr/bin/env bash
# Fails (non-zero) if clang-format-22 would change any tracked C++ or CUDA
# file (.clang-format: LLVM style). Fix with:
#   git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format-22 -i
set -euo pipefail
cd "$(dirname "$0")/../.."
fmt=${CLANG_FORMAT:-clang-format-22}
command -v "$fmt" > /dev/null || { echo "check-format: $fmt not found (tools/scripts/setup.sh installs it)" >&2; exit 1; }
git ls-files -z '*.h' '*.cpp' '*.cu' '*.cuh' | xargs -0 "$fmt" --dry-run -Werror
echo "check-format: $(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | wc -l) files formatted"
