#!/usr/bin/env python3
"""fsdp-run on the cuda driver against the cpu driver.

Without a CUDA device (no /dev/nvidia0, or `nvidia-smi -L` lists none):
`fsdp-run --device cuda` must exit non-zero saying that no CUDA device was
found (or that the build has no cuda driver), and the GPU runs report that
they skipped. GPU or not, FSDP_CUDA_DRIVER naming a missing file, or set
empty, fails naming it. With one:
  - tiny GPT-2 and tiny Llama, 5 AdamW steps: losses on cuda within 1e-4
    (relative) of cpu, f32;
  - 2 ranks sharing the GPU (--collectives mpi) equal 1 rank within 1e-4;
  - --alloc per-buffer: the pool's device_peak_bytes at least the planned
    peak of the buffers.
usage: fsdp_run_cuda_e2e.py FSDP_RUN MPIRUN SCHEDULE_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_harness
from e2e_harness import SCHED, check, finish, mpirun


def has_gpu():
    if not os.path.exists("/dev/nvidia0") or not shutil.which("nvidia-smi"):
        return False
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return p.returncode == 0 and "GPU" in p.stdout


def summary(n, sched, *extra):
    rc, out, err = mpirun(n, os.path.join(SCHED, sched), "--steps", "5", "--seed", "3",
                          *extra, timeout=300)
    if rc != 0:
        print(err)
        return None
    return json.loads(out.strip().splitlines()[-1])


def close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol * abs(y) for x, y in zip(a, b))


# An explicit FSDP_CUDA_DRIVER that does not load is an error naming it, GPU
# or not, never a fall-back to the build's own driver.
for bad, says in (("/nonexistent/libfsdp_cuda.so", "no such file"),
                  ("", "FSDP_CUDA_DRIVER is set but empty")):
    saved = dict(e2e_harness.ENV)
    e2e_harness.ENV["FSDP_CUDA_DRIVER"] = bad
    rc, out, err = mpirun(1, os.path.join(SCHED, "gpt2_tiny_np1.json"), "--device", "cuda")
    e2e_harness.ENV.clear()
    e2e_harness.ENV.update(saved)
    check(rc != 0 and says in err and bad in err,
          "FSDP_CUDA_DRIVER=%r: fsdp-run --device cuda exits %d with: %s" %
          (bad, rc, err.strip().splitlines()[0] if err.strip() else "(nothing)"))

if not has_gpu():
    rc, out, err = mpirun(1, os.path.join(SCHED, "gpt2_tiny_np1.json"), "--device", "cuda")
    check(rc != 0 and ("no CUDA device found" in err or "could not be loaded" in err),
          "no GPU: fsdp-run --device cuda exits %d with: %s" %
          (rc, err.strip().splitlines()[0] if err.strip() else "(nothing)"))
    print("SKIP the cuda runs: this machine has no CUDA device")
    finish()

for sched, n in (("gpt2_tiny_np1.json", 1), ("gpt2_tiny_np2.json", 2),
                 ("llama_tiny_np2.json", 2)):
    extra = ["--collectives", "mpi"] if n > 1 else []
    cpu = summary(n, sched)
    gpu = summary(n, sched, "--device", "cuda", *extra)
    check(cpu is not None and gpu is not None and close(gpu["losses"], cpu["losses"], 1e-4),
          "%s np%d: cuda losses within 1e-4 of cpu (%s vs %s)" %
          (sched, n, gpu and gpu["losses"][-1], cpu and cpu["losses"][-1]))
    if gpu:
        check(gpu["device"].startswith("cuda:"), "%s runs on %s" % (sched, gpu["device"]))
one = summary(1, "gpt2_tiny_np1.json", "--device", "cuda")
two = summary(2, "gpt2_tiny_np2.json", "--device", "cuda", "--collectives", "mpi")
check(one and two and close(two["losses"], one["losses"], 1e-4),
      "2 ranks sharing the GPU (--collectives mpi) equal 1 rank")
pb = summary(1, "gpt2_tiny_np1.json", "--device", "cuda", "--alloc", "per-buffer")
check(pb and pb["device_peak_bytes"] >= pb["planned_peak_bytes"],
      "cuda per-buffer: device_peak_bytes %s >= planned %s" %
      (pb and pb["device_peak_bytes"], pb and pb["planned_peak_bytes"]))
finish()
