#!/usr/bin/env bash
# The GPU check of the device runtime, for one lent H200 (16 cores): about
# 3 minutes of device time (measured; the budget below is 7). Prepared here by
# bench/gpu/prepare.sh; run there from the repository root with .fsdp-gpu
# carried. Nothing is compiled there: the
# binaries are built here, and the only set-up there is unpacking the
# carried packages (dpkg -x) and checking them with ldd (section 0).
#
# usage: bash bench/gpu/check.sh [--dry-run] [--budget S] [--sections LIST]
#   --dry-run      every part that needs no GPU, here: prepare.sh --dry-run
#                  builds a tree in $OUT/dry-gpu (the packages assembled from
#                  this machine's, a tiny Llama under the 8B block stack's
#                  name), and the sections run with the cpu driver standing
#                  in for cuda (the CUDA-only ones report their skip).
#   --budget S     seconds for the whole check, counted from its start
#                  (a dry run's prepare.sh and section 0 included; default
#                  420); each
#                  section's timeout is cut to what is left, and a section
#                  with under 10 s left is skipped (said so), never killed
#                  half-way without a line.
#   --sections L   only these sections (comma-separated numbers, e.g. 1,5);
#                  section 0 always runs (the others need its libraries).
# Everything is written under $OUT (./gpu-check-out without it):
# gpu-check.txt (the lines printed), NAME.out (a run's stdout: its JSON
# summary is the last line) and NAME.err (its stderr) per run. Each section
# prints "== N title: PASS|FAIL|SKIPPED (...)" when it ends; a failing
# section does not stop the next, except section 0 (nothing runs without
# its libraries). Exit status: the number of failed sections.
#
# Sections, and their device time (estimated from what they do: the CPU
# side measured here on 2 loaded EPYC cores, the GPU side from the H200's
# published rates, 989 TFLOP/s dense bf16 and 4.8 TB/s HBM3e):
#   0. carried tree: carry.sh unpack of the 14 .debs (13.6 MB; 1.3 s of
#      CPU measured here) + ldd of the 157 carried ELF files (2.4 s of
#      CPU; 16 s wall here at load 14 on 2 cores)                     ~5 s
#   1. the GPU and the CUDA libraries (nvidia-smi)                    ~2 s
#   2. every cuda kernel against the cpu driver (DriverParityTest: small
#      random inputs; the CUDA context, ~2 s, dominates)              ~15 s
#   3. tiny GPT-2 / Llama, cuda vs cpu, 2 ranks sharing the GPU
#      (fsdp_run_cuda_e2e.py: ~8 runs of under 1 s of work each, each
#      paying process start, MPI and CUDA init, ~3 s)                 ~40 s
#   4. PyTorch as a second reference (import torch + transformers
#      ~10 s, 2 fsdp-run steps of a tiny GPT-2)                       ~25 s
#   5. the Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16;
#      1.49e9 parameters, 1.21e13 FLOP per step): at 989 TFLOP/s a step
#      is 12 ms at full MFU, ~40 ms at the simulator's 31 %, ~250 ms at
#      5 %; AdamW moves ~30 B per parameter (45 GB: 9 ms at 4.8 TB/s).
#      Initialising 1.49e9 parameters on the host and copying them
#      (24 GB of f32 state + bf16 copies over PCIe/HBM) ~15-30 s per run;
#      8 timed steps + 2 per-buffer steps                             ~80 s
#   6. compiled steps: tiny GPT-2 twice (~4 s each) and the Llama block
#      stack compiled (init again + 6 steps)                          ~45 s
#   7. tensor parallelism on cuda: a tiny f64 GPT-2 at (dp, tp) = (2, 2),
#      4 ranks sharing the GPU (--collectives mpi), against 1 rank
#      (fsdp_compare.py, 1e-12: 2 runs of 3 steps, ~3-5 s each of start-up),
#      and the section 5 block stack at tp=2 on 2 ranks sharing the GPU
#      (each rank initialises half the parameters, ~15 s; 8 timed steps of
#      the same FLOP as section 5 plus host-staged MPI collectives of
#      ~16 MB each, a few per layer)                                  ~70 s
#   8. pipeline parallelism on cuda: a tiny f64 GPT-2 at pp=2 (1f1b), 2
#      ranks sharing the GPU (--collectives mpi: MPI_Isend/Irecv through
#      pinned memory), against 1 rank (fsdp_compare.py, 1e-12), and its
#      compiled step against the interpreted one (bit for bit): 3 runs of
#      3 steps, ~3-5 s of start-up each                              ~20 s
#   9. kernel rates and the step's ops: fsdp-device-rates (GEMMs by K and
#      at Llama-3.1-8B's shapes, attention, bandwidth, casts) against the
#      H200 spec and the same GEMMs through PyTorch (device_rates.py
#      --torch), fsdp-run --profile of the block stack against the
#      simulator's timeline (prepare.sh's trace), and PyTorch's eager step
#      of the same model (torch_block_stack.py)                     ~70 s
#   Measured on one H200 (2026-12-04, bench/README.md "The cuda driver on an
#   H200"): sections 0-8 in 106 s; all of 0-9 in 180 s (0: 3, 2: 5, 3: 13,
#   4: 33, 5: 8, 6: 10, 7: 36, 8: 5, 9: 67 s), so a full rerun fits in the
#   15 minutes of a task with the machine's start-ups (~35 s each).
# If a run is slow, drop in this order: 4 (PyTorch: a second reference the
# CPU suite already has through committed fixtures), then 9's PyTorch parts,
# then 6's Llama run, then 5's --alloc per-buffer run; 7's block stack at
# tp=2 (keep its tiny equality check); keep 0-3 and 5's timed run, which
# nothing else can measure: --sections 1,2,3,5 (8 is short: keep it).
set -uo pipefail
cd "$(dirname "$0")/../.."
usage() { # usage [STATUS]: 2 (a usage error) unless given
  sed -n 's/^# \(usage: \)/\1/p' "$0" >&2
  exit "${1:-2}"
}
DRY= BUDGET=420 ONLY=
while [ $# -gt 0 ]; do
  case $1 in
  --dry-run) DRY=1 ;;
  --budget)
    [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "check.sh: --budget needs seconds, got '${2:-}'" >&2; usage; }
    BUDGET=$2
    shift
    ;;
  --sections)
    [[ ${2:-} =~ ^[0-9](,[0-9])*$ ]] || { echo "check.sh: --sections needs numbers 0-9 like 0,1,5, got '${2:-}'" >&2; usage; }
    ONLY=,$2,
    shift
    ;;
  -h | --help) usage 0 ;;
  *)
    echo "check.sh: unknown argument '$1'" >&2
    usage
    ;;
  esac
  shift
done
O=${OUT:-$PWD/gpu-check-out}
mkdir -p "$O" || exit 1
O=$(cd "$O" && pwd)
RES=$O/gpu-check.txt
: > "$RES"
say() { echo "$*" | tee -a "$RES"; }
FAILED=0 T0=$(date +%s) SEC= SEC_T0=0
# begin N TITLE WANT: starts section N with a timeout of WANT seconds cut to
# the budget left (LIMIT); returns 1 (and prints why) if it does not run.
begin() {
  SEC="$1. $2"
  if [ -n "$ONLY" ] && [ "$1" != 0 ] && [[ $ONLY != *,$1,* ]]; then
    return 1
  fi
  local left=$((BUDGET - ($(date +%s) - T0)))
  LIMIT=$(($3 < left ? $3 : left))
  [ "$1" = 0 ] && LIMIT=$3 # outside the budget: nothing runs without it
  if [ "$1" != 0 ] && [ $LIMIT -lt 10 ]; then
    say "== $SEC: SKIPPED (the budget of $BUDGET s is spent: ${left} s left)"
    return 1
  fi
  say "== $SEC (timeout $LIMIT s)"
  SEC_T0=$(date +%s)
}
# end RC DETAIL: the section's result line.
end() {
  local dt=$(($(date +%s) - SEC_T0))
  if [ "$1" = 0 ]; then
    say "== $SEC: PASS ($dt s)${2:+ $2}"
  elif [ "$1" = skip ]; then
    say "== $SEC: SKIPPED ($dt s)${2:+ $2}"
  else
    FAILED=$((FAILED + 1))
    say "== $SEC: FAIL (exit $1, $dt s)${2:+ $2}"
  fi
}
# run NAME CMD...: CMD with stdout to $O/NAME.out and stderr to $O/NAME.err
# under the section's timeout; prints stderr's last lines on failure.
run() {
  local name=$1
  shift
  echo "\$ $*" >> "$RES"
  timeout "$LIMIT" "$@" > "$O/$name.out" 2> "$O/$name.err"
  local rc=$?
  [ $rc = 124 ] && echo "check.sh: $name timed out after $LIMIT s" >> "$O/$name.err"
  [ $rc = 0 ] || tail -n 5 "$O/$name.err" | sed "s/^/  [$name] /" | tee -a "$RES"
  return $rc
}

# equal_runs LABEL A B: fsdp_compare.py of run B against run A (their
# --dump-params files, every loss, parameter and moment within 1e-12
# relative); says LABEL with the comparison's lines and returns its status.
equal_runs() {
  echo "\$ python3 test/tools/fsdp_compare.py --tol 1e-12 ..." >> "$RES"
  python3 test/tools/fsdp_compare.py --tol 1e-12 "$O/$2.out" "$O/$2.json" "$O/$3.out" \
    "$O/$3.json" > "$O/$2-$3.cmp" 2>&1
  local rc=$?
  say "$1: $(tr '\n' ' ' < "$O/$2-$3.cmp")"
  return $rc
}

if [ -n "$DRY" ]; then
  G=$O/dry-gpu DEV=cpu
  say "check.sh --dry-run: prepare.sh --dry-run $G"
  bash bench/gpu/prepare.sh --dry-run "$G" > "$O/prepare.out" 2> "$O/prepare.err" ||
    { tail -n 5 "$O/prepare.err"; say "check.sh: prepare.sh --dry-run failed"; exit 1; }
  P=$G/prefix
else
  G=.fsdp-gpu DEV=cuda P=/opt/fsdp-deps
  [ -d $G ] || { say "check.sh: $G missing: run bench/gpu/prepare.sh here first"; exit 1; }
fi

# 0. The carried libraries, relocated (OPAL_PREFIX), and ldd of everything
#    carried against them: a missing library stops the check here.
CUDA_DIRS=
if begin 0 "carried libraries (unpack, ldd)" 60; then
  rc=0
  [ -n "$DRY" ] || run unpack bash bench/gpu/carry.sh unpack $G/debs $P || rc=$?
  # The CUDA libraries: the toolkit's, else PyTorch's wheels (nvidia-*).
  for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    dir=$( (ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu 2>/dev/null
      python3 -c "import site,glob; [print(d) for p in site.getsitepackages() for d in glob.glob(p+'/nvidia/*/lib')]" 2>/dev/null) |
      while read -r d; do [ -e "$d/$name" ] && { echo "$d"; break; }; done)
    say "cuda library $name: ${dir:-NOT FOUND}"
    [ -n "$dir" ] && CUDA_DIRS=$CUDA_DIRS${CUDA_DIRS:+:}$dir
  done
  files=($G/bin/fsdp-run $G/bin/fsdp-runtime-tests $G/bin/fsdp-device-rates $P)
  [ -f $G/lib/libfsdp_cuda.so ] && [ -z "$DRY" ] && files+=($G/lib/libfsdp_cuda.so)
  if [ -n "$DRY" ]; then
    # Here ldd is slow on a loaded machine: real ldd on the binaries, the
    # DT_NEEDED check on everything.
    run ldd bash bench/gpu/carry.sh ldd $P "$CUDA_DIRS" $G/bin/fsdp-run $G/bin/fsdp-runtime-tests || rc=$?
    [ $rc = 0 ] && { CARRY_NO_LDD=1 run ldd bash bench/gpu/carry.sh ldd $P "$CUDA_DIRS" "${files[@]}" || rc=$?; }
  else
    [ $rc = 0 ] && { run ldd bash bench/gpu/carry.sh ldd $P "$CUDA_DIRS" "${files[@]}" || rc=$?; }
  fi
  grep -h "not found" "$O/ldd.out" 2> /dev/null | head -n 20 | tee -a "$RES"
  end $rc "$(tail -n 1 "$O/ldd.out" 2> /dev/null)"
  [ $rc = 0 ] || { say "check.sh: stopped: the carried tree does not load (section 0)"; exit 1; }
fi
eval "$(bash bench/gpu/carry.sh env $P)"
[ -n "$CUDA_DIRS" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CUDA_DIRS
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
[ -z "$DRY" ] && export FSDP_CUDA_DRIVER=$PWD/$G/lib/libfsdp_cuda.so
ORTERUN=$OPAL_PREFIX/bin/orterun
MPIRUN="$ORTERUN --oversubscribe"

if begin 1 "machine" 30; then
  if [ -n "$DRY" ]; then
    run machine bash -c 'echo "dry run on $(uname -m), $(getconf _NPROCESSORS_ONLN) cores: no GPU"'
    rc=$?
  else
    run machine nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    rc=$?
  fi
  tee -a "$RES" < "$O/machine.out"
  end $rc
fi

if begin 2 "every cuda kernel against the cpu driver (DriverParityTest)" 90; then
  FSDP_PARITY_PRINT=1 run parity $G/bin/fsdp-runtime-tests --gtest_filter='DriverParity.*'
  rc=$?
  # On the GPU a skipped cuda test is a failure: the driver or the device
  # did not come up, and nothing was compared.
  if [ -z "$DRY" ] && [ $rc = 0 ] && grep -q '^\[  SKIPPED \]' "$O/parity.out"; then
    say "  a cuda test was skipped on the GPU: $(grep -m1 -i 'skipped:' "$O/parity.out")"
    rc=1
  fi
  end $rc "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$O/parity.out" | tr '\n' ' ')"
fi

if begin 3 "tiny GPT-2 and Llama on cuda against cpu; ranks sharing the GPU" 120; then
  run e2e python3 test/unit/fsdp_run_cuda_e2e.py $G/bin/fsdp-run "$ORTERUN" test/unit/schedules
  rc=$?
  end $rc "$(tail -n 1 "$O/e2e.out")"
fi

if begin 4 "PyTorch (transformers) as a second reference" 90; then
  if python3 -c "import torch, transformers" 2> /dev/null; then
    run torch python3 bench/gpu/torch_reference.py $G/bin/fsdp-run \
      test/unit/schedules/gpt2_tiny_np1.json test/data/tinyshakespeare.txt $DEV
    rc=$?
    end $rc "$(tail -n 1 "$O/torch.out")"
  else
    end skip "(no torch/transformers in this Python)"
  fi
fi

# The JSON summary of a run: the last line of its stdout (stderr apart).
SUMMARY='
import json, os, sys
def ran(name):  # the summary, or None where this check did not run it
    return last(name) if os.path.exists("%s/%s.out" % (O, name)) else None
def last(name):
    out = open("%s/%s.out" % (O, name)).read().strip().splitlines()
    try:
        return json.loads(out[-1])
    except Exception:
        err = open("%s/%s.err" % (O, name)).read().strip().splitlines()
        lines = [l for l in err if "error" in l] or err[-3:] or ["no output"]
        print("%s: run failed: %s" % (name, " | ".join(lines[:3])))
        return None
'
S=$G/sched
if begin 5 "Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16)" 150; then
  run l8 $MPIRUN -np 1 $G/bin/fsdp-run $S/llama8b-2l.json --device $DEV --steps 10 --warmup 2
  rc=$?
  run l8pb $MPIRUN -np 1 $G/bin/fsdp-run $S/llama8b-2l.json --device $DEV --steps 2 --alloc per-buffer
  rc2=$?
  python3 - "$O" $S/llama8b-2l.report.json <<PY | tee -a "$RES"
O = "$O"
$SUMMARY
rep = json.load(open(sys.argv[2]))
a, b = last("l8"), last("l8pb")
if a:
    st = a["step_time_s"]
    print("step time %.4f s (median of %d), %.0f tokens/s, MFU %.3f (%.3g FLOP / step, bf16 peak 989.4 TFLOP/s)" %
          (st, a["timed_steps"], a["tokens_per_s"], rep["flops_per_rank"] / (st * 989.4e12), rep["flops_per_rank"]))
    print("simulator (h200-8.json): predicted %.4f s; predicted / measured %.3f" %
          (rep["predicted_step_time_s"], rep["predicted_step_time_s"] / st))
    print("losses", a["losses"])
if b:
    print("memory: planned peak %d, with cpu-driver scratch %d; pool high-water (per-buffer) %d (%.3f of planned); cuBLAS workspace %d, NCCL buffers %d" %
          (b["planned_peak_bytes"], b["planned_peak_bytes_with_scratch"], b["device_peak_bytes"],
           b["device_peak_bytes"] / b["planned_peak_bytes"], b["device_workspace_bytes"],
           b.get("device_comm_buffer_bytes", -1)))
PY
  end $((rc != 0 ? rc : rc2))
fi

if begin 6 "compiled steps on cuda (fsdp-run --compiled)" 100; then
  common=(--device $DEV --steps 3 --seed 1 --data test/data/tinyshakespeare.txt)
  run ti $MPIRUN -np 1 $G/bin/fsdp-run $S/gpt2-tiny.json "${common[@]}" --dump-params $O/ti.json
  rc=$?
  run tc $MPIRUN -np 1 $G/bin/fsdp-run --compiled $S/gpt2-tiny.so "${common[@]}" --dump-params $O/tc.json
  rc=$((rc != 0 ? rc : $?))
  run l8c $MPIRUN -np 1 $G/bin/fsdp-run --compiled $S/llama8b-2l.so --device $DEV --steps 10 --warmup 2
  rc=$((rc != 0 ? rc : $?))
  python3 - <<PY | tee -a "$RES"
O = "$O"
$SUMMARY
ti, tc, l8c = last("ti"), last("tc"), last("l8c")
l8 = ran("l8")
if ti and tc:
    same = ti["losses"] == tc["losses"] and open(O + "/ti.json", "rb").read() == open(O + "/tc.json", "rb").read()
    print("tiny GPT-2: %s %s; losses %s; parameters and moments %s" %
          (ti["step"], tc["step"], tc["losses"], "bit-identical" if same else "DIFFER"))
    if not same:
        sys.exit(1)
if l8 and l8c:
    print("Llama block stack: interpreted %.4f s, compiled %.4f s per step (ratio %.3f); losses equal: %s" %
          (l8["step_time_s"], l8c["step_time_s"], l8["step_time_s"] / l8c["step_time_s"],
           l8["losses"] == l8c["losses"]))
PY
  rc=$((rc != 0 ? rc : ${PIPESTATUS[0]}))
  end $rc
fi
if begin 7 "tensor parallelism on cuda (TP 2 x FSDP 2 = 1 rank; 8B block stack at TP 2)" 120; then
  # The tiny GPT-2 in f64 (the cuda driver has f64 for every kernel: cuBLAS
  # dgemm, f64 attention/norm/optimizer kernels), 4 ranks sharing the GPU.
  common=(--device $DEV --steps 3 --seed 5 --data test/data/tinyshakespeare.txt)
  run tp1 $MPIRUN -np 1 $G/bin/fsdp-run $S/gpt2-f64-ref.json "${common[@]}" --dump-params $O/tp1.json
  rc=$?
  run tp4 $MPIRUN -np 4 $G/bin/fsdp-run $S/gpt2-f64-tp2x2.json "${common[@]}" --collectives mpi \
    --dump-params $O/tp4.json
  rc=$((rc != 0 ? rc : $?))
  if [ $rc = 0 ]; then
    equal_runs "tiny GPT-2 f64, (dp, tp) = (2, 2) vs 1 rank, tol 1e-12" tp1 tp4
    rc=$?
  fi
  run l8tp $MPIRUN -np 2 $G/bin/fsdp-run $S/llama8b-2l-tp2.json --device $DEV --collectives mpi \
    --steps 10 --warmup 2
  rc2=$?
  python3 - $S/llama8b-2l-tp2.report.json <<PY | tee -a "$RES"
O = "$O"
$SUMMARY
rep = json.load(open(sys.argv[1]))
a = last("l8tp")
l8 = ran("l8")
if a:
    st = a["step_time_s"]
    print("block stack at tp=2 on 2 ranks sharing the GPU: step time %.4f s (median of %d), %.0f tokens/s" %
          (st, a["timed_steps"], a["tokens_per_s"]))
    if l8:
        print("  section 5 at 1 rank: %.4f s, %.0f tokens/s (tp2 / 1 rank step time %.3f)" %
              (l8["step_time_s"], l8["tokens_per_s"], st / l8["step_time_s"]))
    print("  simulator (h200-8.json: 2 GPUs on NVLink, not 2 ranks on one GPU): predicted %.4f s (tp comm %.4f s exposed), %.0f tokens/s" %
          (rep["predicted_step_time_s"], rep.get("tp_exposed_s", 0), rep["predicted_tokens_per_s"]))
    print("  losses", a["losses"])
PY
  end $((rc != 0 ? rc : rc2))
fi
if begin 8 "pipeline parallelism on cuda (PP 2 on one GPU, --collectives mpi, = 1 rank; compiled = interpreted)" 60; then
  common=(--device $DEV --steps 3 --seed 5 --data test/data/tinyshakespeare.txt)
  run pp1 $MPIRUN -np 1 $G/bin/fsdp-run $S/gpt2-pp-ref.json "${common[@]}" --dump-params $O/pp1.json
  rc=$?
  run pp2 $MPIRUN -np 2 $G/bin/fsdp-run $S/gpt2-pp2.json "${common[@]}" --collectives mpi \
    --dump-params $O/pp2.json
  rc=$((rc != 0 ? rc : $?))
  run pp2c $MPIRUN -np 2 $G/bin/fsdp-run --compiled $S/gpt2-pp2.so "${common[@]}" --collectives mpi \
    --dump-params $O/pp2c.json
  rc=$((rc != 0 ? rc : $?))
  if [ $rc = 0 ]; then
    equal_runs "tiny GPT-2 f64, pp = 2 (1f1b, m = 4) vs 1 rank, tol 1e-12" pp1 pp2
    rc=$?
    if cmp -s $O/pp2.json $O/pp2c.json; then
      say "pp = 2 compiled vs interpreted: parameters and moments bit-identical"
    else
      say "pp = 2 compiled vs interpreted: parameters DIFFER"
      rc=1
    fi
  fi
  end $rc
fi
if begin 9 "kernel rates and the block stack's ops against the spec; PyTorch's step beside section 5's" 150; then
  # The rates the H200 spec assumes (GEMM efficiency by inner dimension K,
  # attention, memory bandwidth) measured through the driver, and the same
  # GEMMs through PyTorch, written as a spec (measured-spec.json); then where section 5's step goes, op by op
  # (fsdp-run --profile: each op waits for its kernels) against the
  # simulator's timeline of the same plan (prepare.sh's trace); then
  # PyTorch's eager step of the same model (torch_block_stack.py).
  Q=() TQ=()
  [ -n "$DRY" ] && Q=(--quick) TQ=(--device cpu --layers 1 --hidden 64 --heads 4 --kv-heads 2
    --intermediate 128 --vocab 256 --seq 16)
  run rates $G/bin/fsdp-device-rates --device $DEV "${Q[@]}"
  rc=$?
  TORCH=
  python3 -c "import torch, transformers" 2> /dev/null && TORCH=1
  if [ $rc = 0 ]; then
    TFLAG=() # PyTorch's GEMMs need CUDA: not in a dry run
    [ -n "$TORCH" ] && [ -z "$DRY" ] && TFLAG=(--torch)
    run ratesv python3 bench/gpu/device_rates.py $O/rates.out bench/clusters/h200-8.json \
      "${TFLAG[@]}" --spec-out $O/measured-spec.json
    rc=$?
    tee -a "$RES" < "$O/ratesv.out"
  fi
  run l8prof $MPIRUN -np 1 $G/bin/fsdp-run $S/llama8b-2l.json --device $DEV --steps 3 --warmup 1 --profile
  rc2=$?
  rc3=0
  if [ -n "$TORCH" ]; then
    run torchstep python3 bench/gpu/torch_block_stack.py test/lit/Inputs/models/llama-3.1-8b.json "${TQ[@]}"
    rc3=$?
  fi
  python3 - $S/llama8b-2l.trace.json $S/llama8b-2l.report.json <<PY | tee -a "$RES"
O = "$O"
$SUMMARY
import collections
sim = collections.defaultdict(float)
for e in json.load(open(sys.argv[1]))["traceEvents"]:
    if e.get("ph") == "X" and e.get("tid") == 0:  # the compute stream
        sim[e["name"]] += e["dur"] * 1e-6
rep = json.load(open(sys.argv[2]))
p = last("l8prof")
if p:
    prof = p["profile"]
    ops = sorted(set(sim) | set(prof), key=lambda k: -max(sim.get(k, 0), prof.get(k, {}).get("seconds", 0)))
    print("per-op seconds per step, measured (--profile, synchronised) vs simulated (h200-8.json):")
    for k in ops:
        m, s_ = prof.get(k, {}).get("seconds", 0), sim.get(k, 0)
        if max(m, s_) >= 1e-4 or k.startswith("("):
            print("  %-28s measured %8.2f ms  simulated %8.2f ms  %s" %
                  (k, m * 1e3, s_ * 1e3, "ratio %.2f" % (m / s_) if s_ > 0 else ""))
    print("  %-28s measured %8.2f ms  simulated %8.2f ms (profiled step %.2f ms)" %
          ("total", sum(v["seconds"] for v in prof.values()) * 1e3, sum(sim.values()) * 1e3,
           p["step_time_s"] * 1e3))
t, l8 = ran("torchstep"), ran("l8")
if t:
    print("PyTorch %s eager (autocast bf16, SDPA, fused AdamW) on %s: step %.4f s (median of %d), %.0f tokens/s, MFU %.3f; max allocated %d, reserved %d bytes" %
          (t["torch"], t["device"], t["step_time_s"], t["timed_steps"], t["tokens_per_s"],
           rep["flops_per_rank"] / (t["step_time_s"] * 989.4e12), t["max_memory_allocated_bytes"] if "max_memory_allocated_bytes" in t else -1,
           t.get("max_memory_reserved_bytes", -1)))
    if l8:
        print("  fsdp-run (section 5) %.4f s: fsdp-run / PyTorch step time %.3f; device peak %d bytes" %
              (l8["step_time_s"], l8["step_time_s"] / t["step_time_s"], l8["device_peak_bytes"]))
PY
  end $((rc != 0 ? rc : rc2 != 0 ? rc2 : rc3))
fi
say "== done in $(($(date +%s) - T0)) s: $FAILED section(s) failed"
exit $FAILED
