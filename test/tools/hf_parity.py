#!/usr/bin/env python3
"""fsdp-run against Hugging Face transformers on one committed fixture.

The fixture (test/tools/make_hf_fixtures.py) holds a tiny model's config,
weights, a batch file and transformers' float64 results. For each world size
this imports the config, plans it (policy=block: one unit per layer, with the
fixture's AdamW hyper-parameters), runs fsdp-run from the fixture's weights
(--init-from) on its batches (--data batch.bin --data-order sequential) and
checks, in f32:

  loss       every step's loss within 1e-5 relative of transformers'
  params     every parameter after 1 and 3 AdamW steps within 1e-5 (relative
             L2 norm of the difference, per tensor)
  grads      every parameter's gradient norm at step 1 within 1e-4 relative:
             the gradient is read off one SGD step with lr = 1, no weight
             decay, in f64 (g = p0 - p1: exact to ~1e-16, so the f64 graph is
             what is compared)
  export     --export writes the trained parameters exactly (bit-identical
             to --dump-params), and --init-from of the export followed by an
             identity step exports bit-identical bytes again (SGD with lr
             1e-30: the update is below half an ulp of every f32 parameter,
             so rounding returns each one unchanged; the planner rejects
             lr = 0)

GPT-2's attention key bias (the middle third of attn.c_attn.bias) has an
identically zero true gradient: a bias added to every key shifts each
query's scores by one constant, which softmax ignores. Its computed f32
gradient is rounding noise (~1e-9) that AdamW's m / (sqrt(v) + eps) turns
into steps of up to ~lr (torch's own f32 run drifts there the same way). That
slice is held to |difference| <= steps * lr instead, and the rest of the
tensor to 1e-5.

A gradient that is merely tiny is ill-conditioned the same way: Qwen2's
k_proj bias has a gradient norm of ~1e-4 (rotary embeddings keep a key bias
from being exactly softmax-invariant), so f32 rounding is ~1e-3 of it and
AdamW carries that into the update. A tensor may therefore exceed 1e-5 only
where torch's own f32 run (recorded in the fixture) lands at least as far
from the f64 reference; each such tensor is named in the output.

With --pp P every run is planned with P pipeline stages (pp=P, micro-batches
= --micro-batches, default P): each stage reads its own parameters from the
fixture and --export merges the stages into one file. --micro-batches M
alone plans M micro-batches without stages.

usage: hf_parity.py FIXTURE_DIR WORK_DIR --mpirun "mpirun ..." [--ranks 1 4]
                    [--tp T] [--pp P [--micro-batches M]]
Tools (fsdp-import, fsdp-opt, fsdp-translate, fsdp-run) come from PATH.
Prints one line per check and "OK" at the end; exits 1 on a mismatch.
"""
import argparse
import json
import math
import os
import shlex
import struct
import subprocess
import sys
from array import array

LOSS_TOL, PARAM_TOL, GRAD_TOL = 1e-5, 1e-5, 1e-4


def read_safetensors(path):
    """{name: (shape, [values])} of an F32/F64 safetensors file (stdlib only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        a = array({"F32": "f", "F64": "d"}[e["dtype"]])
        a.frombytes(data[lo:hi])
        out[name] = (e["shape"], list(a))
    return out


def read_raw(path):
    """{name: (dtype, shape, bytes)}: for bit-exact comparisons."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
            for k, e in header.items() if k != "__metadata__"}


def rel_norm(a, b):
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(y * y for y in b))
    return num / den if den else num


class Checker:
    def __init__(self):
        self.failed = False

    def check(self, ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        self.failed |= not ok


def run(cmd, stdout=None):
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print("FAIL command: %s\n%s%s" % (cmd, p.stdout[-2000:], p.stderr[-2000:]))
        sys.exit(1)
    if stdout:
        with open(stdout, "w") as f:
            f.write(p.stdout)
    return p.stdout


def summary(log):
    return json.loads(log.strip().splitlines()[-1])


def key_bias_slice(name, shape):
    """The zero-true-gradient elements of a tensor: [lo, hi) or None."""
    if name.endswith(".attn.c_attn.bias"):
        c = shape[0] // 3
        return (c, 2 * c)
    return None


def compare_params(chk, label, ours, ref, steps, lr, model_type, torch_drift):
    worst, relaxed = 0.0, []
    for name, (shape, want) in ref.items():
        got = ours[name]["data"]
        sl = key_bias_slice(name, shape) if model_type == "gpt2" else None
        if sl:
            lo, hi = sl
            noise = max(abs(got[i] - want[i]) for i in range(lo, hi))
            chk.check(noise <= steps * lr, "%s %s key-bias slice |diff| %.2e <= %g (steps * lr)"
                      % (label, name, noise, steps * lr))
            got = got[:lo] + got[hi:]
            want = want[:lo] + want[hi:]
        r = rel_norm(got, want)
        tol = max(PARAM_TOL, torch_drift[name])
        if r > tol:
            chk.check(False, "%s %s relative difference %.2e > %.2e" % (label, name, r, tol))
        elif r > PARAM_TOL:
            relaxed.append("%s %.2e (torch f32 %.2e)" % (name, r, torch_drift[name]))
        else:
            worst = max(worst, r)
    chk.check(True, "%s: %d tensors, worst relative difference %.2e <= %g%s"
              % (label, len(ref) - len(relaxed), worst, PARAM_TOL,
                 "; within torch's f32: " + ", ".join(relaxed) if relaxed else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fixture")
    ap.add_argument("work")
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--tp", type=int, default=1,
                    help="tensor-parallel degree of every run (tp=T)")
    ap.add_argument("--pp", type=int, default=1,
                    help="pipeline stages of every run (pp=P)")
    ap.add_argument("--micro-batches", type=int, default=0,
                    help="micro-batches of every run (default: P under --pp, else none)")
    a = ap.parse_args()
    fx, work = a.fixture, a.work
    os.makedirs(work, exist_ok=True)
    exp = json.load(open(os.path.join(fx, "expected.json")))
    o = exp["optimizer"]
    adamw = "lr=%r beta1=%r beta2=%r eps=%r weight-decay=%r" % (
        o["lr"], o["beta1"], o["beta2"], o["eps"], o["weight_decay"])
    steps = exp["steps"]
    q = shlex.quote
    model = os.path.join(work, "model")
    size = "--seq %d --batch %d" % (exp["seq"], exp["batch"])
    run("fsdp-import %s %s -o %s.mlir" % (q(os.path.join(fx, "config.json")), size, model))
    run("fsdp-import %s %s --dtype f64 -o %s-f64.mlir" % (q(os.path.join(fx, "config.json")),
                                                          size, model))
    data = "--init-from %s --data %s --data-order sequential" % (
        q(os.path.join(fx, "model.safetensors")), q(os.path.join(fx, "batch.bin")))
    p0 = read_safetensors(os.path.join(fx, "model.safetensors"))
    ref1 = read_safetensors(os.path.join(fx, "step1.safetensors"))
    ref3 = read_safetensors(os.path.join(fx, "step3.safetensors"))
    chk = Checker()
    mb = a.micro_batches or (a.pp if a.pp > 1 else 0)
    pp = ("pp=%d " % a.pp if a.pp > 1 else "") + ("micro-batches=%d " % mb if mb else "")
    for n in a.ranks:
        w = os.path.join(work, "n%d" % n)

        def plan(src, opts, out):
            run("fsdp-opt %s --fsdp-pipeline=%s | fsdp-translate --fsdp-to-schedule -o %s"
                % (src, q("world-size=%d tp=%d policy=block %s%s" % (n, a.tp, pp, opts)), out))

        def fsdp_run(sched, args, log):
            return summary(run("%s -np %d fsdp-run %s %s" % (a.mpirun, n, sched, args), log))

        plan(model + ".mlir", adamw, w + "-adamw.json")
        plan(model + "-f64.mlir", "optimizer=sgd lr=1 weight-decay=0", w + "-grad.json")
        plan(model + ".mlir", "optimizer=sgd lr=1e-30 weight-decay=0", w + "-identity.json")
        print("world size %d" % n + (" tp %d" % a.tp if a.tp > 1 else "")
              + (" pp %d" % a.pp if a.pp > 1 else ""))

        s1 = fsdp_run(w + "-adamw.json", "%s --steps 1 --dump-params %s-p1.json" % (data, w),
                      w + "-log1.txt")
        s3 = fsdp_run(w + "-adamw.json", "%s --steps %d --dump-params %s-p3.json --export %s-e.safetensors"
                      % (data, steps, w, w), w + "-log3.txt")
        worst = max(abs(x - y) / abs(y) for x, y in zip(s3["losses"], exp["losses"]))
        chk.check(worst <= LOSS_TOL and s1["losses"][0] == s3["losses"][0],
                  "loss of %d steps vs transformers: worst relative difference %.2e <= %g"
                  % (steps, worst, LOSS_TOL))
        mt = exp["model_type"]
        drift = exp["torch_f32"]["param_rel_diff"]
        compare_params(chk, "params after step 1", json.load(open(w + "-p1.json"))["params"],
                       ref1, 1, o["lr"], mt, drift["1"])
        dump3 = json.load(open(w + "-p3.json"))["params"]
        compare_params(chk, "params after step %d" % steps, dump3, ref3, steps, o["lr"], mt,
                       drift[str(steps)])

        fsdp_run(w + "-grad.json", "%s --steps 1 --dump-params %s-g.json" % (data, w),
                 w + "-logg.txt")
        after = json.load(open(w + "-g.json"))["params"]
        worst = 0.0
        for name, want in exp["grad_norms"].items():
            g = math.sqrt(sum((x - y) ** 2 for x, y in zip(p0[name][1], after[name]["data"])))
            err = abs(g - want) / max(want, 1e-12)
            if abs(g - want) > GRAD_TOL * want + 1e-10:
                chk.check(False, "grad norm of %s: %.9g vs transformers %.9g" % (name, g, want))
            worst = max(worst, err if want > 1e-8 else 0.0)
        chk.check(True, "grad norms of %d tensors: worst relative difference %.2e <= %g"
                  % (len(exp["grad_norms"]), worst, GRAD_TOL))

        # --export of the trained state, bit for bit against --dump-params
        # (%.9g round-trips f32), then export -> init-from -> export.
        e = read_safetensors(w + "-e.safetensors")
        chk.check(sorted(e) == sorted(dump3) and
                  all(array("f", dump3[k]["data"]).tobytes() == array("f", e[k][1]).tobytes()
                      for k in e),
                  "--export equals the trained parameters bit for bit (%d tensors)" % len(e))
        fsdp_run(w + "-identity.json", "--init-from %s-e.safetensors --data %s --steps 1 "
                 "--export %s-e2.safetensors" % (w, q(os.path.join(fx, "batch.bin")), w),
                 w + "-loge2.txt")
        chk.check(read_raw(w + "-e.safetensors") == read_raw(w + "-e2.safetensors"),
                  "--init-from of the export, an identity step, --export: bit-identical")
    print("FAILED" if chk.failed else "OK")
    sys.exit(1 if chk.failed else 0)


if __name__ == "__main__":
    main()
