#!/usr/bin/env bash
# ctest gpu-carry: the tree bench/gpu/prepare.sh carries to the GPU machine
# runs there. Assembles it (carry.sh assemble: the carried packages from this
# machine's installed copies, as dpkg -x of their .debs would lay them out)
# into an empty prefix, then
#   1. carry.sh ldd: every carried binary and library resolves within the
#      prefix (and the base system) alone, the check check.sh starts with;
#   2. the check disagrees when a carried library is missing (libmunge.so.2
#      removed: the library libpmix.so.2 needs that the carry lacked);
#   3. a 2-rank run of fsdp-run under the prefix's Open MPI (orterun from
#      the prefix, OPAL_PREFIX, the prefix's components only), whose ranks
#      load libmpi and libmunge from the prefix (LD_DEBUG) and whose losses
#      equal the same run under this machine's mpirun.
# usage: carry_test.sh FSDP_RUN SCHEDULE MPIRUN [LIBFSDP_CUDA]
# Exit 77 (skipped) with a message when dpkg, the packages or mpirun are
# absent.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run=$1 sched=$2 mpirun=$3 cuda=${4:-}
skip() { echo "gpu-carry: skipped: $*"; exit 77; }
fail() { echo "gpu-carry: FAIL: $*"; exit 1; }
command -v dpkg > /dev/null || skip "no dpkg (not a Debian machine)"
command -v readelf > /dev/null || skip "no readelf (binutils)"
for p in $(bash "$here/carry.sh" packages); do
  dpkg -s "$p" > /dev/null 2>&1 || skip "package $p is not installed here"
done
[ -x "$run" ] && [ -f "$sched" ] || skip "no fsdp-run or schedule"
command -v "${mpirun%% *}" > /dev/null || skip "no $mpirun"

P=$(mktemp -d /tmp/gpu-carry.XXXXXX)
trap 'rm -rf "$P"' EXIT
t0=$(date +%s)
bash "$here/carry.sh" assemble "$P" || fail "assemble"
echo "assembled $(du -sh "$P" | cut -f1) in $(($(date +%s) - t0)) s"

# 1. ldd on the binaries and libraries (real ldd + DT_NEEDED in the prefix),
#    the components by DT_NEEDED alone (ldd is slow on a loaded machine).
bins=("$run")
[ -n "$cuda" ] && [ -f "$cuda" ] && bins+=("$cuda")
L=$P/usr/lib/x86_64-linux-gnu
CUDA_DIRS=$(ls -d /usr/local/cuda/lib64 2>/dev/null)
out=$(bash "$here/carry.sh" ldd "$P" "$CUDA_DIRS" "${bins[@]}" \
  $(find "$L" -maxdepth 1 -name '*.so.*' -type f) 2>&1) || fail "ldd: $out"
echo "$out" | tail -1
out=$(CARRY_NO_LDD=1 bash "$here/carry.sh" ldd "$P" "$CUDA_DIRS" "$P" 2>&1) || fail "needed: $out"
echo "$out" | tail -1

# 2. The check can disagree: without libmunge2's library.
mkdir -p "$P.munge" && mv "$L"/libmunge.so.2* "$P.munge/"
out=$(CARRY_NO_LDD=1 bash "$here/carry.sh" ldd "$P" "$CUDA_DIRS" "$L" 2>&1) &&
  fail "the check passed without libmunge.so.2"
grep -q "libpmix.so.2.*libmunge.so.2 not found" <<<"$out" ||
  fail "the check did not name libmunge.so.2: $out"
echo "without libmunge.so.2: $(grep -m1 libmunge <<<"$out")"
mv "$P.munge"/* "$L/" && rmdir "$P.munge"

# 3. Two ranks under the prefix's Open MPI, against this machine's.
ref=$($mpirun -np 2 "$run" "$sched" --steps 2 2> /dev/null | tail -1)
[ -n "$ref" ] || fail "the reference run under $mpirun failed"
eval "$(bash "$here/carry.sh" env "$P")"
mkdir -p "$P/bin" && cp "$run" "$P/bin/" # the carried copy, run from the prefix
"$P/usr/bin/orterun" --allow-run-as-root --oversubscribe -np 2 -x LD_DEBUG=libs \
  "$P/bin/$(basename "$run")" "$sched" --steps 2 > "$P.out" 2> "$P.err"
rc=$?
got=$(tail -1 "$P.out")
loads=$(grep -c "calling init: $P/.*/libmpi.so.40" "$P.err")
munge=$(grep -c "calling init: $P/.*/libmunge.so.2" "$P.err")
rm -f "$P.out" "$P.err"
[ $rc = 0 ] || fail "the 2-rank run under the prefix's orterun exited $rc"
[ "$loads" -ge 2 ] || fail "the ranks did not load libmpi.so.40 from the prefix ($loads)"
[ "$munge" -ge 1 ] || fail "libmunge.so.2 was not loaded from the prefix ($munge)"
python3 - "$ref" "$got" <<'PY' || fail "losses differ: $ref vs $got"
import json, sys
a, b = (json.loads(x)["losses"] for x in sys.argv[1:3])
print("2 ranks under the prefix's orterun: losses %s (this machine's mpirun: %s)" % (b, a))
sys.exit(a != b)
PY
echo "gpu-carry: OK in $(($(date +%s) - t0)) s"
