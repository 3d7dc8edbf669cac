#!/usr/bin/env bash
# One command for all the tests on a fresh Debian 12 machine: installs the
# packages, checks the format, builds, runs the static checks (lint.sh: file
# sizes, clang-tidy on the files the last change touches) and every test
# (GoogleTest units, lit/FileCheck pass tests, end-to-end equality runs under
# mpirun) through ctest.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/setup.sh
bash tools/scripts/check-format.sh
bash tools/scripts/build.sh
bash tools/scripts/lint.sh
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j 2
