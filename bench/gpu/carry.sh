#!/usr/bin/env bash
# The libraries bench/gpu/prepare.sh carries to the GPU machine (which has
# CUDA, Python and PyTorch but no Open MPI, OpenBLAS or package registry),
# in one place for prepare.sh, check.sh and the test (carry_test.sh):
#
#   carry.sh packages                 the Debian packages carried
#   carry.sh unpack DEBS PREFIX       dpkg -x each DEBS/*.deb into PREFIX, then
#                                     prune (below)
#   carry.sh assemble PREFIX          the same tree from this machine's
#                                     installed packages (dpkg -L), no network
#   carry.sh env PREFIX               the exports that run Open MPI from PREFIX
#   carry.sh ldd PREFIX DIRS FILE...  every FILE (or ELF file under a directory)
#                                     against PREFIX's libraries and DIRS
#                                     (colon-separated; the CUDA libraries):
#                                     `ldd` with only those on the library
#                                     path, any "not found" (a library or a
#                                     symbol version) printed; and, where
#                                     readelf exists, each DT_NEEDED resolved
#                                     in PREFIX, DIRS or the base system
#                                     below only (ldd also searches this
#                                     machine's /usr/lib, which has them all).
#                                     Exit 1 if anything is missing.
#                                     CARRY_NO_LDD=1: DT_NEEDED only.
#
# The package list is the closure of fsdp-run's, fsdp-runtime-tests' and
# Open MPI's DT_NEEDED entries (readelf -d) outside the base system:
# libpmix.so.2 needs libmunge.so.2 (libmunge2), libhwloc.so.15 needs
# libudev.so.1 (libudev1), fsdp-run needs libcrypto.so.3 (libssl3; kept
# apart in usr/lib/fsdp-fallback and put on the library path only where the
# machine has no libcrypto.so.3, so that it never shadows the one the
# machine's Python was built with). Open MPI components whose libraries are not
# carried (UCX, libfabric, PSM, verbs, netlink: network transports a
# one-node run does not use) are pruned, so that none fails to load.
set -uo pipefail

PACKAGES="libopenmpi3 openmpi-bin openmpi-common libhwloc15 libudev1
libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libmunge2
libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0 libssl3"
# The base system every machine that runs PyTorch has: glibc, the GCC
# runtime and zlib (carrying them would shadow the machine's own).
BASE="ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0
librt.so.1 libutil.so.1 libresolv.so.2 libgcc_s.so.1 libstdc++.so.6 libz.so.1"
MULTI=lib/x86_64-linux-gnu

prune() {
  local p=$1/usr
  mkdir -p "$p/lib/fsdp-fallback"
  mv -f "$p"/$MULTI/libcrypto.so.3 "$p"/$MULTI/libssl.so.3 "$p/lib/fsdp-fallback/" 2>/dev/null
  rm -f "$p"/$MULTI/openmpi/lib/openmpi3/mca_*_{ucx,ofi,psm,psm2,openib}.so \
    "$p"/$MULTI/openmpi/lib/openmpi3/mca_reachable_netlink.so \
    "$p"/$MULTI/libmca_common_{ucx,ofi,verbs}.so*
}

libdirs() { # the library directories of a prefix ($2: with the fallback)
  local p=$1/usr/$MULTI
  echo "$p:$p/openblas-pthread:$p/openmpi/lib${2:+:$1/usr/lib/fsdp-fallback}"
}

case ${1:-} in
packages)
  echo $PACKAGES
  ;;
unpack)
  [ $# -eq 3 ] || { echo "usage: carry.sh unpack DEBS PREFIX" >&2; exit 2; }
  mkdir -p "$3" || exit 1
  n=0
  for f in "$2"/*.deb; do
    [ -e "$f" ] || continue
    dpkg -x "$f" "$3" || exit 1
    n=$((n + 1))
  done
  [ $n -gt 0 ] || { echo "carry.sh: no .deb in $2" >&2; exit 1; }
  prune "$3"
  ;;
assemble)
  [ $# -eq 2 ] || { echo "usage: carry.sh assemble PREFIX" >&2; exit 2; }
  mkdir -p "$2" || exit 1
  list=$(mktemp)
  for pkg in $PACKAGES; do
    dpkg -L "$pkg" >> "$list" 2>/dev/null || { echo "carry.sh: $pkg is not installed" >&2; rm -f "$list"; exit 1; }
  done
  # Files and symbolic links (directories come with them), as dpkg -x; one
  # tar for all (the list is ~1,000 paths).
  python3 -c 'import os,sys; [print(l.strip()) for l in open(sys.argv[1]) if os.path.islink(l.strip()) or os.path.isfile(l.strip())]' "$list" |
    tar -cf - --no-recursion -T - 2>/dev/null | tar -xf - -C "$2" || { rm -f "$list"; exit 1; }
  rm -f "$list"
  prune "$2"
  ;;
env)
  [ $# -eq 2 ] || { echo "usage: carry.sh env PREFIX" >&2; exit 2; }
  p=$(cd "$2" && pwd)/usr
  # OPAL_PREFIX relocates Open MPI (its components, help files); PMIx
  # finds its components from its own prefix (pmix2), here relocated.
  echo "export OPAL_PREFIX=$p PATH=$p/bin:\$PATH"
  fallback=
  /sbin/ldconfig -p 2>/dev/null | grep -q 'libcrypto.so.3 ' || fallback=1
  echo "export LD_LIBRARY_PATH=$(libdirs "$(cd "$2" && pwd)" $fallback):\${LD_LIBRARY_PATH:-}"
  echo "export PMIX_INSTALL_PREFIX=$p/$MULTI/pmix2"
  echo "export PMIX_MCA_mca_base_component_path=$p/$MULTI/pmix2/lib/pmix"
  echo "export OMPI_MCA_mca_base_component_path=$p/$MULTI/openmpi/lib/openmpi3"
  ;;
ldd)
  [ $# -ge 4 ] || { echo "usage: carry.sh ldd PREFIX DIRS FILE..." >&2; exit 2; }
  prefix=$2 extra=$3
  shift 3
  path=$(libdirs "$prefix" 1)${extra:+:$extra}
  files=()
  for a in "$@"; do
    if [ -d "$a" ]; then
      while IFS= read -r f; do
        [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] && files+=("$f")
      done < <(find "$a" -type f -name '*.so*' -o -type f -path '*/bin/*')
    else
      files+=("$a")
    fi
  done
  bad=0
  # One ldd and one readelf for all files (ldd prints "FILE:" before each).
  # (CARRY_NO_LDD=1: DT_NEEDED only, for many files on a loaded machine.)
  if [ -z "${CARRY_NO_LDD:-}" ]; then
    LD_LIBRARY_PATH=$path ldd "${files[@]}" 2>&1 |
      awk -v f="${files[0]}" '/^[^ \t].*:$/ {f = $0} /not found/ {print "ldd " f " " $0; bad = 1} END {exit bad}' || bad=1
  fi
  if command -v readelf > /dev/null; then
    have=" $(echo $BASE) "
    IFS=: read -ra dirs <<<"$path"
    for d in "${dirs[@]}"; do
      [ -d "$d" ] && have+="$(ls -1 "$d" | tr '\n' ' ')"
    done
    readelf -d "${files[@]}" 2>/dev/null |
      awk -v have=" $have " -v f="${files[0]}" '
        /^File: / {f = $2}
        /\(NEEDED\)/ {
          n = $0; sub(/.*\[/, "", n); sub(/\].*/, "", n)
          if (!index(have, " " n " ")) {print "needed " f ": " n " not found in the carried tree"; bad = 1}
        }
        END {exit bad}' || bad=1
  fi
  echo "carry.sh ldd: ${#files[@]} files checked: $([ $bad = 0 ] && echo "nothing missing" || echo "MISSING libraries above")"
  exit $bad
  ;;
*)
  echo "usage: carry.sh packages|unpack|assemble|env|ldd ..." >&2
  exit 2
  ;;
esac
