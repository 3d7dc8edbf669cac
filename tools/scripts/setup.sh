#!/usr/bin/env bash
# Installs every Debian 12 package that the build, the tests and the main job need.
# Idempotent: packages already present are left alone. Runs as root (or through sudo).
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build lld ccache git python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-format-22 clang-tidy-22
  openmpi-bin libopenmpi-dev libopenblas-dev nlohmann-json3-dev
  libgtest-dev googletest zlib1g-dev libssl-dev libzstd-dev libcurl4-openssl-dev libedit-dev libxml2-dev libffi-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# cudnn-frontend's C++ headers for the cuda driver's cuDNN attention
# (runtime/lib/cuda/CudnnAttention.cpp), where the CUDA toolkit is installed:
# the header-only library ships in the `nvidia-cudnn-frontend` wheel's
# include/, unpacked into /opt/cudnn-frontend/include (CMake looks there).
CUDNN_FRONTEND_VERSION=1.32.0
if command -v nvcc >/dev/null 2>&1 &&
   [ ! -f /opt/cudnn-frontend/include/cudnn_frontend.h ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: \
    "nvidia-cudnn-frontend==${CUDNN_FRONTEND_VERSION}" -d "$tmp"
  python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("include/"):
            z.extract(name, "/opt/cudnn-frontend")
PY
  rm -rf "$tmp"
  echo "setup: cudnn-frontend ${CUDNN_FRONTEND_VERSION} headers in /opt/cudnn-frontend/include"
fi
