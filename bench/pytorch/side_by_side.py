#!/usr/bin/env python3
"""The main job in PyTorch and in fsdp-run, side by side, on the CPU.

The job: the tiny GPT-2 of bench/README.md (transformers' GPT2LMHeadModel,
4 layers, hidden 128, 4 heads, byte vocabulary 256, learned positions 1024,
MLP 512, gelu_new, LayerNorm eps 1e-5, no dropout, lm_head tied to wte, f32)
trained on test/data/tinyshakespeare.txt with sequence T = 64 and a global
batch of B = 16 sequences per step, AdamW lr 1e-3, betas (0.9, 0.999),
eps 1e-8, weight decay 0.1 on every parameter.

Both sides start from the same weights and see the same batches:
  * init: torch.manual_seed(0); GPT2LMHeadModel(config).save_pretrained(OUT)
    writes OUT/model.safetensors (the tied lm_head is not stored); PyTorch
    loads it with from_pretrained, fsdp-run with --init-from.
  * data: the text's bytes as little-endian uint16 token ids, OUT/data.bin.
    At 1-based step s, global window g (0 <= g < B) is the tokens
    [((s-1)*B + g)*T, ... + T + 1) of data.bin, indices modulo the token
    count; tokens = window[:T], targets = window[1:]. Rank r of N takes
    windows [r*B/N, (r+1)*B/N) (fsdp-run: --data-order sequential).
  * loss: mean cross-entropy over the rank's positions; the reported loss of
    a step is the mean over ranks.

World size 1 is plain PyTorch (no FSDP, no process group). World sizes 2
and 4 are FSDP2 (torch.distributed.fsdp.fully_shard on every transformer
block, then on the whole model) over gloo, ranks launched by torchrun. fsdp-run
runs the schedule that fsdp-opt's --fsdp-pipeline (policy=block) compiles for
the same world size, under mpirun. Every process has one thread
(OMP/OPENBLAS/MKL_NUM_THREADS=1; torch.set_num_threads(1)); 4 ranks share
the machine's cores as they are (oversubscribed on 2 cores).

Measured, per world size N:
  * step time (seconds): PyTorch: wall time of forward + backward +
    optimizer.step + zero_grad, each step started after a dist.barrier();
    the step's time is the max over ranks; a run's figure is the median over
    the steps after the first --warmup. fsdp-run: its summary's step_time_s
    (the same definition: median over timed steps of the max over ranks).
    Runs alternate torch, fsdp-run, torch, fsdp-run, ... (--repeats of
    each); the table shows the median over repeats of the per-run medians.
    "speed ratio" = torch step time / fsdp-run step time (> 1: fsdp-run is
    faster).
  * peak RSS per rank (bytes, shown in MB = 1e6 bytes): PyTorch:
    getrusage(RUSAGE_SELF).ru_maxrss * 1024 at the end of the run, max over
    ranks (includes the Python interpreter, torch and transformers); fsdp-run:
    its summary's peak_rss_bytes ("n/a" where the summary lacks it). Median
    over repeats.
  * the two loss curves (first repeat): losses at a few steps and the max
    |torch - fsdp-run| over the first 10 steps and over all steps.

Outputs (in --out, default build/bench/pytorch): results.md (the markdown
tables, also printed to stdout), results.json (every raw number: per-step
losses and step times of every run), loss_curves.png (both curves per world
size and their difference), plus the model, data, schedules and logs.

usage: /tmp/ref/bin/python bench/pytorch/side_by_side.py [--steps 100]
           [--repeats 3] [--warmup 5] [--ranks 1 2 4] [--out DIR]
needs torch, transformers, safetensors, numpy and matplotlib in the Python
that runs it (torchrun is taken from the same environment), and the tools in
build/bin (fsdp-import, fsdp-opt, fsdp-translate, fsdp-run) and mpirun.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.path.join(REPO, "build", "bin")
TEXT = os.path.join(REPO, "test", "data", "tinyshakespeare.txt")
GPT2_JSON = os.path.join(REPO, "test", "lit", "Inputs", "models", "gpt2.json")

# The job's shape and optimizer (bench/README.md, "Main job").
LAYERS, HIDDEN, HEADS, VOCAB, POSITIONS, SEQ, BATCH = 4, 128, 4, 256, 1024, 64, 16
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.1

THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MPI_ENV = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
LOSS_TABLE_STEPS = (1, 2, 5, 10, 25, 50, 75, 100)


def gpt2_config():
    from transformers import GPT2Config
    return GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB,
                      n_positions=POSITIONS, n_inner=None, activation_function="gelu_new",
                      layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      summary_first_dropout=0.0, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=None)


# ----------------------------------------------------------------------------
# The PyTorch worker: one process per rank (torchrun), or the single process
# of world size 1.
# ----------------------------------------------------------------------------

def proc_status_bytes(*keys):
    """Fields of /proc/self/status in bytes (0 where absent)."""
    vals = dict.fromkeys(keys, 0)
    try:
        for line in open("/proc/self/status"):
            k, _, v = line.partition(":")
            if k in vals:
                vals[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return vals


def worker(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2LMHeadModel

    transformers.utils.logging.disable_progress_bar()

    torch.set_num_threads(1)
    distributed = args.world_size > 1
    if distributed:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        assert world == args.world_size, (world, args.world_size)
    else:
        rank, world = 0, 1
    assert BATCH % world == 0

    # Every rank loads the whole safetensors file, before sharding.
    model = GPT2LMHeadModel.from_pretrained(args.model_dir, dtype=torch.float32)
    model.train()  # from_pretrained returns eval mode; dropouts are 0 either way
    assert model.lm_head.weight is model.transformer.wte.weight, "lm_head not tied"
    if distributed:
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)

    data = np.fromfile(args.data, dtype="<u2").astype(np.int64)
    ntok = len(data)
    per_rank = BATCH // world
    offs = np.arange(SEQ + 1)

    def batch(step):  # 1-based step; this rank's windows
        g0 = rank * per_rank
        starts = ((step - 1) * BATCH + g0 + np.arange(per_rank)) * SEQ
        win = torch.from_numpy(data[(starts[:, None] + offs[None, :]) % ntok])
        return win[:, :SEQ].contiguous(), win[:, 1:].contiguous()

    rss_setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times, losses = [], []
    for step in range(1, args.steps + 1):
        tokens, targets = batch(step)
        if distributed:
            dist.barrier()
        t0 = time.perf_counter()
        logits = model(input_ids=tokens).logits
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach().item())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    status = proc_status_bytes("RssAnon", "RssFile")

    t = torch.tensor(times, dtype=torch.float64)
    l = torch.tensor(losses, dtype=torch.float64)
    r = torch.tensor([rss, rss_setup, status["RssAnon"], status["RssFile"]], dtype=torch.float64)
    if distributed:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        dist.all_reduce(l, op=dist.ReduceOp.SUM)
        l /= world
        dist.all_reduce(r, op=dist.ReduceOp.MAX)
    if rank == 0:
        timed = t.tolist()[args.warmup:]
        out = {
            "world_size": world,
            "losses": l.tolist(),
            "step_times_s": t.tolist(),
            "step_time_s": statistics.median(timed) if timed else None,
            "peak_rss_bytes": int(r[0].item()),
            "rss_after_setup_bytes": int(r[1].item()),
            "rss_anon_at_end_bytes": int(r[2].item()),
            "rss_file_at_end_bytes": int(r[3].item()),
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "attn_implementation": getattr(model.config, "_attn_implementation", None),
            "fsdp": "fully_shard (FSDP2), gloo" if distributed else "none",
        }
        with open(args.result, "w") as f:
            json.dump(out, f)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
        # Gloo's worker threads sometimes abort the interpreter's teardown
        # ("terminate called without an active exception", SIGABRT after
        # everything is done, about 1 run in 5 at 4 ranks here): leave
        # without it; the result is written.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# ----------------------------------------------------------------------------
# The driver.
# ----------------------------------------------------------------------------

def env_with(*extra):
    env = dict(os.environ)
    env.update(THREAD_ENV)
    for e in extra:
        env.update(e)
    return env


def run_logged(cmd, log, env, cwd=REPO):
    """Runs cmd, stdout+stderr to log; raises with the log's tail on failure."""
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if p.returncode != 0:
        tail = open(log).read()[-3000:]
        raise RuntimeError("command failed (rc %d): %s\n--- %s (tail) ---\n%s"
                           % (p.returncode, " ".join(cmd), log, tail))


def prepare_inputs(out):
    """OUT/model.safetensors (+ config.json) from torch.manual_seed(0), OUT/data.bin."""
    import numpy as np
    import torch
    import transformers
    from transformers import GPT2LMHeadModel
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(gpt2_config())
    model.save_pretrained(out)
    nparams = sum(p.numel() for p in model.parameters())
    raw = np.frombuffer(open(TEXT, "rb").read(), dtype=np.uint8)
    raw.astype("<u2").tofile(os.path.join(out, "data.bin"))
    return {"parameters": nparams, "tokens": int(raw.size)}


def build_schedule(out, n):
    """fsdp-import -> fsdp-opt --fsdp-pipeline -> fsdp-translate: OUT/gpt2.N.json."""
    mlir = os.path.join(out, "gpt2.mlir")
    if not os.path.exists(mlir):
        run_logged([os.path.join(BIN, "fsdp-import"), GPT2_JSON, "--layers", str(LAYERS),
                    "--hidden", str(HIDDEN), "--heads", str(HEADS), "--vocab", str(VOCAB),
                    "--seq", str(SEQ), "--batch", str(BATCH), "-o", mlir],
                   os.path.join(out, "import.log"), env_with())
    sharded = os.path.join(out, "gpt2.%d.sharded.mlir" % n)
    sched = os.path.join(out, "gpt2.%d.json" % n)
    run_logged([os.path.join(BIN, "fsdp-opt"), mlir,
                "--fsdp-pipeline=world-size=%d policy=block lr=%g weight-decay=%g"
                % (n, LR, WEIGHT_DECAY), "-o", sharded],
               os.path.join(out, "opt.%d.log" % n), env_with())
    run_logged([os.path.join(BIN, "fsdp-translate"), sharded, "--fsdp-to-schedule", "-o", sched],
               os.path.join(out, "translate.%d.log" % n), env_with())
    return sched


def fsdp_run_command(out, n, sched, args):
    """The fsdp-run command line of world size n (the one place it is built)."""
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n),
            os.path.join(BIN, "fsdp-run"), sched, "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--init-from", os.path.join(out, "model.safetensors"),
            "--data", os.path.join(out, "data.bin"), "--data-order", "sequential"]


def run_fsdp(out, n, sched, args, rep):
    log = os.path.join(out, "fsdp.%d.r%d.log" % (n, rep))
    run_logged(fsdp_run_command(out, n, sched, args), log, env_with(MPI_ENV))
    lines = [x for x in open(log).read().splitlines() if x.strip()]
    summary = json.loads(lines[-1])
    return {"world_size": n,
            "losses": summary["losses"],
            "step_time_s": summary["step_time_s"],
            "peak_rss_bytes": summary.get("peak_rss_bytes"),
            "summary": summary}


def torch_command(out, n, args, result):
    here = os.path.abspath(__file__)
    wargs = ["--worker", "--world-size", str(n), "--steps", str(args.steps),
             "--warmup", str(args.warmup), "--model-dir", out,
             "--data", os.path.join(out, "data.bin"), "--result", result]
    if n == 1:
        return [sys.executable, here] + wargs
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return [torchrun, "--standalone", "--nnodes", "1", "--nproc-per-node", str(n), here] + wargs


def run_torch(out, n, args, rep):
    result = os.path.join(out, "torch.%d.r%d.json" % (n, rep))
    log = os.path.join(out, "torch.%d.r%d.log" % (n, rep))
    if os.path.exists(result):
        os.remove(result)
    run_logged(torch_command(out, n, args, result), log, env_with())
    return json.load(open(result))


def fmt_mb(b):
    return "n/a" if b is None else "%.1f" % (b / 1e6)


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(results, args):
    rows, curves = [], {}
    for n in args.ranks:
        r = results[str(n)]
        t_torch = median_or_none([x["step_time_s"] for x in r["torch"]])
        t_fsdp = median_or_none([x["step_time_s"] for x in r["fsdp"]])
        m_torch = median_or_none([x["peak_rss_bytes"] for x in r["torch"]])
        m_fsdp = median_or_none([x["peak_rss_bytes"] for x in r["fsdp"]])
        lt, lf = r["torch"][0]["losses"], r["fsdp"][0]["losses"]
        diffs = [abs(a - b) for a, b in zip(lt, lf)]
        s = {"torch_step_time_s": t_torch, "fsdp_step_time_s": t_fsdp,
             "speed_ratio": (t_torch / t_fsdp) if t_torch and t_fsdp else None,
             "torch_peak_rss_bytes": m_torch, "fsdp_peak_rss_bytes": m_fsdp,
             "max_abs_loss_diff_first10": max(diffs[:10]),
             "max_abs_loss_diff_all": max(diffs),
             "torch_rss_after_setup_bytes": median_or_none(
                 [x.get("rss_after_setup_bytes") for x in r["torch"]]),
             "torch_rss_anon_at_end_bytes": median_or_none(
                 [x.get("rss_anon_at_end_bytes") for x in r["torch"]]),
             "torch_losses_same_every_repeat": all(x["losses"] == lt for x in r["torch"]),
             "fsdp_losses_same_every_repeat": all(x["losses"] == lf for x in r["fsdp"])}
        r["summary"] = s
        curves[n] = (lt, lf)
        rows.append(s)

    md = ["## PyTorch against fsdp-run: the main job (tiny GPT-2, T=%d, B=%d), %d steps"
          % (SEQ, BATCH, args.steps), "",
          "Step time: median over %d alternating repeats of each run's median step time "
          "(steps after the first %d; max over ranks). Speed ratio = torch time / fsdp-run time "
          "(fsdp-run's speed over torch's). Peak RSS per rank: max over ranks, median over repeats, "
          "MB = 1e6 bytes. World size 1: plain PyTorch; 2 and 4: FSDP2 (fully_shard) on gloo."
          % (args.repeats, args.warmup), "",
          "| ranks | torch step (s) | fsdp-run step (s) | speed ratio | torch tokens/s | "
          "fsdp-run tokens/s | torch peak RSS/rank (MB) | fsdp-run peak RSS/rank (MB) | "
          "max abs loss diff, steps 1-10 | max abs loss diff, all steps |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    tok = SEQ * BATCH
    for n, s in zip(args.ranks, rows):
        f = lambda x, p="%.4f": "n/a" if x is None else p % x
        md.append("| %d | %s | %s | %s | %s | %s | %s | %s | %.2e | %.2e |" % (
            n, f(s["torch_step_time_s"]), f(s["fsdp_step_time_s"]),
            f(s["speed_ratio"], "%.2f"),
            f(tok / s["torch_step_time_s"] if s["torch_step_time_s"] else None, "%.0f"),
            f(tok / s["fsdp_step_time_s"] if s["fsdp_step_time_s"] else None, "%.0f"),
            fmt_mb(s["torch_peak_rss_bytes"]), fmt_mb(s["fsdp_peak_rss_bytes"]),
            s["max_abs_loss_diff_first10"], s["max_abs_loss_diff_all"]))
    md += ["", "Loss (mean over ranks) at selected steps, first repeat:", ""]
    hdr = "| step |" + "".join(" torch N=%d | fsdp-run N=%d |" % (n, n) for n in args.ranks)
    md += [hdr, "|---|" + "---|---|" * len(args.ranks)]
    for st in [x for x in LOSS_TABLE_STEPS if x <= args.steps] + (
            [args.steps] if args.steps not in LOSS_TABLE_STEPS else []):
        md.append("| %d |" % st + "".join(" %.5f | %.5f |" % (curves[n][0][st - 1],
                                                               curves[n][1][st - 1])
                                          for n in args.ranks))
    notes = []
    for n, s in zip(args.ranks, rows):
        if s["torch_rss_after_setup_bytes"]:
            notes.append("torch N=%d: %s MB of the %s MB peak RSS is reached before step 1 "
                         "(interpreter, torch, transformers, the loaded model); the steps add %s MB"
                         % (n, fmt_mb(s["torch_rss_after_setup_bytes"]),
                            fmt_mb(s["torch_peak_rss_bytes"]),
                            fmt_mb(s["torch_peak_rss_bytes"] - s["torch_rss_after_setup_bytes"])))
        if not s["torch_losses_same_every_repeat"]:
            notes.append("torch N=%d: losses differ between repeats" % n)
        if not s["fsdp_losses_same_every_repeat"]:
            notes.append("fsdp-run N=%d: losses differ between repeats" % n)
    if notes:
        md += [""] + ["Note: " + x for x in notes]
    return "\n".join(md) + "\n", curves


def plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted(curves)
    fig, axes = plt.subplots(2, len(ns), figsize=(5 * len(ns), 6.5), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex="col")
    for j, n in enumerate(ns):
        lt, lf = curves[n]
        steps = range(1, len(lt) + 1)
        ax = axes[0][j]
        ax.plot(steps, lt, label="PyTorch" + (" (FSDP2, gloo)" if n > 1 else ""), lw=1.5)
        ax.plot(steps, lf, label="fsdp-run", lw=1.0, ls="--")
        ax.set_title("world size %d" % n)
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        ax.legend()
        ax = axes[1][j]
        ax.plot(steps, [b - a for a, b in zip(lt, lf)], color="C2", lw=1.0)
        ax.set_xlabel("step")
        ax.set_ylabel("fsdp-run - torch")
        ax.grid(alpha=0.3)
    fig.suptitle("tiny GPT-2 on tinyshakespeare: loss per step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def check_tools():
    missing = [t for t in ("fsdp-import", "fsdp-opt", "fsdp-translate", "fsdp-run")
               if not os.path.exists(os.path.join(BIN, t))]
    if missing:
        sys.exit("side_by_side.py: missing in %s: %s (build the project first)"
                 % (BIN, ", ".join(missing)))
    if shutil.which("mpirun") is None:
        sys.exit("side_by_side.py: mpirun not found")
    h = subprocess.run([os.path.join(BIN, "fsdp-run"), "--help"], capture_output=True, text=True)
    help_text = h.stdout + h.stderr
    lacking = [f for f in ("--init-from", "--data-order") if f not in help_text]
    if lacking:
        sys.exit("side_by_side.py: build/bin/fsdp-run does not know %s (needed to start from "
                 "the same weights and batches); rebuild it, or pass --torch-only"
                 % ", ".join(lacking))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each side per world size")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the timings")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench", "pytorch"))
    ap.add_argument("--torch-only", action="store_true",
                    help="run only the PyTorch side (fsdp-run columns n/a)")
    # The worker's own arguments (internal).
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--world-size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    if args.steps <= args.warmup:
        sys.exit("side_by_side.py: --steps must exceed --warmup")
    for n in args.ranks:
        if n < 1 or BATCH % n:
            sys.exit("side_by_side.py: world size %d does not divide the batch %d" % (n, BATCH))
    if not args.torch_only:
        check_tools()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    t_start = time.time()
    info = prepare_inputs(out)
    print("# %d parameters, %d tokens; outputs in %s" % (info["parameters"], info["tokens"], out),
          file=sys.stderr)

    results = {}
    for n in args.ranks:
        sched = None if args.torch_only else build_schedule(out, n)
        r = results[str(n)] = {"torch": [], "fsdp": []}
        for rep in range(args.repeats):
            t = run_torch(out, n, args, rep)
            r["torch"].append(t)
            msg = "# N=%d repeat %d: torch %.4f s/step" % (n, rep + 1, t["step_time_s"])
            if args.torch_only:
                r["fsdp"].append({"world_size": n, "losses": [float("nan")] * args.steps,
                                  "step_time_s": None, "peak_rss_bytes": None})
            else:
                fr = run_fsdp(out, n, sched, args, rep)
                r["fsdp"].append(fr)
                msg += ", fsdp-run %.4f s/step" % fr["step_time_s"]
            print(msg, file=sys.stderr, flush=True)

    md, curves = summarize(results, args)
    plot(curves, os.path.join(out, "loss_curves.png"))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    meta = {"args": {k: v for k, v in vars(args).items()
                     if k not in ("worker", "world_size", "model_dir", "data", "result")},
            "job": {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "vocab": VOCAB,
                    "positions": POSITIONS, "seq": SEQ, "batch": BATCH, "lr": LR,
                    "betas": BETAS, "eps": EPS, "weight_decay": WEIGHT_DECAY, **info},
            "fsdp_run_commands": {str(n): fsdp_run_command(out, n, os.path.join(
                out, "gpt2.%d.json" % n), args) for n in args.ranks},
            "torch_commands": {str(n): torch_command(out, n, args, "RESULT")
                               for n in args.ranks},
            "env": THREAD_ENV, "mpi_env": MPI_ENV, "nproc": os.cpu_count(),
            "wall_s": time.time() - t_start, "results": results}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(md)
    print("# wrote %s/results.md, results.json, loss_curves.png (%.0f s)"
          % (out, time.time() - t_start), file=sys.stderr)


if __name__ == "__main__":
    main()
