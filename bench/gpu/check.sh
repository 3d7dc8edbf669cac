#!/usr/bin/env bash
# The GPU check of the device runtime (issue: one device runtime for CPU and
# GPU), for one lent H200, in under 8 minutes. Prepared here by
# bench/gpu/prepare.sh; run there from the repository root with .fsdp-gpu
# carried:
#   1. the GPU and the CUDA libraries it finds (cudart, cuBLAS, NCCL);
#   2. every cuda kernel against the cpu driver on random inputs (f32 within
#      1e-5, bf16 within 1e-2: DriverParityTest);
#   3. tiny GPT-2 and Llama, 5 AdamW steps on cuda equal to cpu (losses
#      within 1e-4, f32), 2 ranks sharing the GPU (--collectives mpi) equal
#      to 1 rank (test/unit/fsdp_run_cuda_e2e.py);
#   4. PyTorch as a second reference: the tiny GPT-2's loss at step 2 from
#      fsdp-run's parameters after step 1, in transformers' GPT2LMHeadModel
#      on the GPU (bench/gpu/torch_reference.py);
#   5. the Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16): step
#      time, tokens/s and MFU (the planner's FLOPs over bf16 dense peak
#      989.4 TFLOP/s), the planned peak against the pool's measured one
#      (--alloc per-buffer), and the simulator's prediction on the H200 spec;
#   6. compiled steps on cuda (fsdp-compile's STEP.so, built in prepare.sh):
#      the tiny GPT-2 compiled vs interpreted on the GPU, losses and
#      --dump-params bit-identical; the Llama block stack's step time
#      compiled vs interpreted (--compiled: the same .so as on cpu).
# Results: $OUT/gpu-check.txt (or ./gpu-check.txt without $OUT).
set -uo pipefail
cd "$(dirname "$0")/../.."
G=.fsdp-gpu
RES=${OUT:-.}/gpu-check.txt
: > "$RES"
say() { echo "$*" | tee -a "$RES"; }
run() { say "\$ $*"; "$@" 2>&1 | tee -a "$RES"; return ${PIPESTATUS[0]}; }
[ -d $G ] || { say "check.sh: $G missing: run bench/gpu/prepare.sh here first"; exit 1; }

# Open MPI and OpenBLAS from the carried packages, relocated (OPAL_PREFIX).
D=/opt/fsdp-deps
mkdir -p $D && for f in $G/debs/*.deb; do dpkg -x "$f" $D; done
R=$D/usr
LIBS=$R/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu/openblas-pthread
# The CUDA libraries: the toolkit's, else PyTorch's wheels (nvidia-*).
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  dir=$( (ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu 2>/dev/null;
          python3 -c "import site,glob; [print(d) for p in site.getsitepackages() for d in glob.glob(p+'/nvidia/*/lib')]" 2>/dev/null) |
        while read -r d; do [ -e "$d/$name" ] && { echo "$d"; break; }; done)
  say "cuda library $name: ${dir:-NOT FOUND}"
  [ -n "$dir" ] && LIBS=$LIBS:$dir
done
export LD_LIBRARY_PATH=$LIBS:${LD_LIBRARY_PATH:-} OPAL_PREFIX=$R PATH=$R/bin:$PATH
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 FSDP_CUDA_DRIVER=$PWD/$G/lib/libfsdp_cuda.so
MPIRUN="$R/bin/orterun --oversubscribe"

say "== 1. machine"
run nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
say "== 2. every cuda kernel against the cpu driver"
FSDP_PARITY_PRINT=1 run timeout 120 $G/bin/fsdp-runtime-tests --gtest_filter='DriverParity.*'
say "== 3. tiny GPT-2 and Llama on cuda against cpu; ranks sharing the GPU"
run timeout 240 python3 test/unit/fsdp_run_cuda_e2e.py $G/bin/fsdp-run "$R/bin/orterun" test/unit/schedules
say "== 4. PyTorch (transformers) as a second reference"
run timeout 120 python3 bench/gpu/torch_reference.py $G/bin/fsdp-run test/unit/schedules/gpt2_tiny_np1.json test/data/tinyshakespeare.txt cuda
say "== 5. Llama-3.1-8B-shaped block stack (2 layers, seq 2048, bf16)"
S=$G/sched/llama8b-2l.json
timeout 200 $MPIRUN -np 1 $G/bin/fsdp-run $S --device cuda --steps 6 --warmup 2 > $G/l8.log 2>&1; rc1=$?
timeout 150 $MPIRUN -np 1 $G/bin/fsdp-run $S --device cuda --steps 2 --alloc per-buffer > $G/l8pb.log 2>&1; rc2=$?
python3 - $G/sched/llama8b-2l.report.json $G/l8.log $G/l8pb.log $rc1 $rc2 <<'PY' | tee -a "$RES"
import json, sys
rep = json.load(open(sys.argv[1]))
def last(p):
    lines = open(p).read().strip().splitlines()
    try:
        return json.loads(lines[-1])
    except Exception:
        errors = [l for l in lines if "error" in l] or lines[-5:]
        print("run failed: %s" % "\n".join(errors[:3]))
        return None
a, b = last(sys.argv[2]), last(sys.argv[3])
if a:
    st = a["step_time_s"]
    print("step time %.4f s (median of %d), %.0f tokens/s, MFU %.3f (%.3g FLOP / step, bf16 peak 989.4 TFLOP/s)" %
          (st, a["timed_steps"], a["tokens_per_s"], rep["flops_per_rank"] / (st * 989.4e12), rep["flops_per_rank"]))
    print("simulator (h200-8.json): predicted %.4f s; predicted / measured %.3f" %
          (rep["predicted_step_time_s"], rep["predicted_step_time_s"] / st))
    print("losses", a["losses"])
if b:
    print("memory: planned peak %d, with cpu-driver scratch %d; pool high-water (per-buffer) %d (%.3f of planned); cuBLAS workspace %d" %
          (b["planned_peak_bytes"], b["planned_peak_bytes_with_scratch"], b["device_peak_bytes"],
           b["device_peak_bytes"] / b["planned_peak_bytes"], b["device_workspace_bytes"]))
PY
say "== 6. compiled steps on cuda (fsdp-run --compiled)"
C=$G/sched
timeout 60 $MPIRUN -np 1 $G/bin/fsdp-run $C/gpt2-tiny.json --device cuda --steps 3 --seed 1 \
  --data test/data/tinyshakespeare.txt --dump-params $G/ti.json > $G/ti.log 2>&1; rc3=$?
timeout 60 $MPIRUN -np 1 $G/bin/fsdp-run --compiled $C/gpt2-tiny.so --device cuda --steps 3 --seed 1 \
  --data test/data/tinyshakespeare.txt --dump-params $G/tc.json > $G/tc.log 2>&1; rc4=$?
timeout 200 $MPIRUN -np 1 $G/bin/fsdp-run --compiled $C/llama8b-2l.so --device cuda --steps 6 --warmup 2 \
  > $G/l8c.log 2>&1; rc5=$?
python3 - $G/ti.log $G/tc.log $G/ti.json $G/tc.json $G/l8.log $G/l8c.log $rc3 $rc4 $rc5 <<'PY' | tee -a "$RES"
import json, sys
def last(p):
    lines = open(p).read().strip().splitlines()
    try:
        return json.loads(lines[-1])
    except Exception:
        errors = [l for l in lines if "error" in l] or lines[-5:]
        print("run failed (%s): %s" % (p, "\n".join(errors[:3])))
        return None
ti, tc, l8, l8c = last(sys.argv[1]), last(sys.argv[2]), last(sys.argv[5]), last(sys.argv[6])
if ti and tc:
    same = ti["losses"] == tc["losses"] and open(sys.argv[3], "rb").read() == open(sys.argv[4], "rb").read()
    print("tiny GPT-2 on cuda: %s %s; losses %s; parameters and moments %s" %
          (ti["step"], tc["step"], tc["losses"], "bit-identical" if same else "DIFFER"))
if l8 and l8c:
    print("Llama block stack on cuda: interpreted %.4f s, compiled %.4f s per step (ratio %.3f); losses equal: %s" %
          (l8["step_time_s"], l8c["step_time_s"], l8["step_time_s"] / l8c["step_time_s"],
           l8["losses"] == l8c["losses"]))
PY
say "== done"
