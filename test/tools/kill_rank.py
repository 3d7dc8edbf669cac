#!/usr/bin/env python3
"""Kills a rank (SIGKILL) in the middle of a step or of `fsdp-run --save`.

usage: kill_rank.py WORK_DIR --mpirun "mpirun ..." [--mid-step | --stop |
                    --stop-at-start] [--pipeline [--compiled]]

--stop: rank 1 gets SIGSTOP instead (it stops responding); with
--timeout 3 the other rank's watchdog must stop the job within 15 s,
naming the step and the instruction it waits in.

--stop-at-start: rank 1 gets SIGSTOP as soon as its process exists (in
MPI's start or the checks before step 1); with --timeout 3 the other rank's
watchdog must stop the job within 15 s, naming the start-up. (Before
2026-12-02 the watchdog timed steps and saves only, and the job hung.)

--pipeline: the model (GPT-2 untied) runs as 2 pipeline stages of one rank
(pp=2, 1f1b, 4 micro-batches; up to 3
attempts to stop rank 1 inside a step), so that rank 1 is stage 1; --compiled runs
fsdp-compile's step of it instead of the JSON schedule.

--mid-step: a 2-rank training run gets SIGKILL on rank 1 once step 2 has
been printed; the job must exit non-zero within 10 s, and its messages must
say that rank 1 was killed.

Otherwise (mid-save):
A GPT-2 shrunk to 2 layers, hidden 256 but with its real 50,257-token
vocabulary (13.4M parameters, ~80 MB of state per rank at 2 ranks) makes a
save long enough to hit: step 1 is saved to CK; then a run resumes from CK
and saves over it, and rank 1 gets SIGKILL as soon as CK.partial/ appears
(the new checkpoint is being written; the old one is still in place). The
job must exit non-zero within 30 s; CK must still be the step-1 checkpoint,
and `--load CK` must run. Tools come from PATH. Prints "OK" or exits 1.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def rank_pids(rank, session):
    """PIDs of fsdp-run processes of session `session` (this job's mpirun
    and its children, never another test's ranks) whose Open MPI rank is
    `rank`."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open("/proc/%s/stat" % d).read()
            if int(stat[stat.rindex(")") + 2:].split()[3]) != session:
                continue
            cmd = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"fsdp-run"):
                continue
            env = open("/proc/%s/environ" % d, "rb").read().split(b"\0")
            if b"OMPI_COMM_WORLD_RANK=%d" % rank in env:
                pids.append(int(d))
        except OSError:
            pass
    return pids


def signal_and_wait(p, victims, sig, limit):
    """Sends `sig` to `victims` (rank 1's processes of job `p`) and waits up
    to `limit` s for the job to end; returns (stdout, stderr, seconds
    waited). Fails (after killing the job) when it does not end in time."""
    for pid in victims:
        os.kill(pid, sig)
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("the job did not exit within %d s of rank 1's %s" %
             (limit, signal.Signals(sig).name))
    finally:
        for pid in victims:  # a stopped rank mpirun could not reap
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return out, err, time.time() - t0


def mid_step(run, stop, want=None, last=True):
    """Returns False (to run again) when `want` is not in the watchdog's
    message and this is not the `last` attempt."""
    extra = " --timeout 3" if stop else ""
    p = subprocess.Popen(run + " --steps 100000" + extra, shell=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in p.stdout:
        if line.startswith("step 2 "):
            break
    else:
        p.wait()
        fail("the run ended before step 2 (exit %s): %s" % (p.returncode, p.stderr.read()[-1500:]))
    victims = rank_pids(1, p.pid)
    if not victims:
        fail("no rank-1 fsdp-run process found")
    _, err, waited = signal_and_wait(p, victims, signal.SIGSTOP if stop else signal.SIGKILL,
                                     15 if stop else 10)
    if p.returncode == 0:
        fail("the job exited 0 although rank 1 was %s" % ("stopped" if stop else "killed"))
    if stop:
        said = "watchdog: step " in err and "has not finished after 3 s" in err
        if said and want and want not in err and not last:
            # SIGSTOP landed between two steps (the other rank then waits in
            # the loss's all-reduce, outside the step): stop it again.
            return False
        print("stopped rank 1 mid-step; the job exited %d after %.1f s; the watchdog %s" %
              (p.returncode, waited, "names the step" if said else "said nothing"))
    else:
        said = "rank 1" in err and "signal 9" in err
        print("killed rank 1 mid-step; the job exited %d after %.1f s; the message %s rank 1" %
              (p.returncode, waited, "names" if said else "does NOT name"))
    if not said:
        fail("stderr:\n" + err[-2000:])
    for l in err.splitlines():
        if "watchdog" in l:
            print(l[l.index("watchdog"):])
            break
    print("OK")
    return True


def stop_at_start(run):
    p = subprocess.Popen(run + " --steps 3 --timeout 3", shell=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    victims, deadline = [], time.time() + 30
    while not victims:
        if p.poll() is not None or time.time() > deadline:
            fail("no rank-1 fsdp-run process seen before the job ended (exit %s)" %
                 p.returncode)
        victims = rank_pids(1, p.pid)
    out, err, waited = signal_and_wait(p, victims, signal.SIGSTOP, 15)
    if p.returncode == 0:
        fail("the job exited 0 although rank 1 was stopped")
    said = "watchdog: the start-up" in err and "has not finished after 3 s" in err
    print("stopped rank 1 at its start; the job exited %d after %.1f s; the watchdog %s" %
          (p.returncode, waited, "names the start-up" if said else "said nothing"))
    if not said:
        fail("stderr:\n" + err[-2000:])
    if "step 1 " in out:
        fail("a step ran although rank 1 was stopped at its start")
    print("OK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--mid-step", action="store_true")
    ap.add_argument("--stop", action="store_true")
    ap.add_argument("--stop-at-start", action="store_true")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--compiled", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit", "Inputs",
                       "models", "gpt2-untied.json" if a.pipeline else "gpt2.json")
    mlir, sched = os.path.join(a.work, "m.mlir"), os.path.join(a.work, "s.json")
    planned, so = os.path.join(a.work, "p.mlir"), os.path.join(a.work, "s.so")
    ck = os.path.join(a.work, "ck")
    opts = "world-size=2 policy=block" + (" pp=2 pp-schedule=1f1b micro-batches=4"
                                          if a.pipeline else "")
    # Pipeline: a small vocabulary (the untied head is a second V x C matrix),
    # so that a step stays well inside --timeout 3 on a loaded machine.
    shape = " --vocab 1024 --seq 16 --batch 8" if a.pipeline else " --seq 8 --batch 2"
    subprocess.run("fsdp-import %s --layers 2 --hidden 256 --heads 4%s -o %s && "
                   "fsdp-opt %s --fsdp-pipeline='%s' -o %s && "
                   "fsdp-translate %s --fsdp-to-schedule -o %s" %
                   (cfg, shape, mlir, mlir, opts, planned, planned, sched), shell=True,
                   check=True)
    if a.compiled:
        subprocess.run(["fsdp-compile", planned, "-o", so], check=True)
    run = "%s -np 2 fsdp-run %s" % (a.mpirun, "--compiled " + so if a.compiled else sched)
    if a.stop_at_start:
        stop_at_start(run)
        return
    if a.mid_step or a.stop:
        # A pipeline's stalled stage is named only while the other waits on
        # a transfer inside the step: up to 3 attempts to stop it there.
        tries = 3 if a.pipeline and a.stop else 1
        for k in range(tries):
            if mid_step(run, a.stop, "is waiting for" if a.pipeline else None,
                        k == tries - 1):
                break
        return
    subprocess.run(run + " --steps 1 --save " + ck, shell=True, check=True,
                   stdout=subprocess.DEVNULL)
    before = json.load(open(os.path.join(ck, "index.json")))["step"]

    p = subprocess.Popen(run + " --load %s --steps 1 --save %s" % (ck, ck), shell=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    deadline = time.time() + 120
    while not os.path.isdir(ck + ".partial"):
        if p.poll() is not None or time.time() > deadline:
            fail("the save finished or failed before it could be interrupted")
        time.sleep(0.0005)
    victims = rank_pids(1, p.pid)  # start_new_session: the session id is p.pid
    if not victims:
        fail("no rank-1 fsdp-run process found")
    _, err, waited = signal_and_wait(p, victims, signal.SIGKILL, 30)
    if p.returncode == 0:
        fail("the job exited 0 although rank 1 was killed")
    print("killed rank 1 during the save; the job exited %d after %.1f s" %
          (p.returncode, waited))

    after = json.load(open(os.path.join(ck, "index.json")))["step"]
    if after != before:
        fail("the checkpoint is step %d, not the previous step %d" % (after, before))
    r = subprocess.run(run + " --load %s --steps 1" % ck, shell=True, capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("the previous checkpoint does not load:\n" + r.stderr[-2000:])
    first = json.loads(r.stdout.strip().splitlines()[-1])["first_step"]
    print("the previous checkpoint (step %d) loads: the run continues at step %d" %
          (before, first))
    print("OK")


if __name__ == "__main__":
    main()
