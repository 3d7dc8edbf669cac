#!/usr/bin/env python3
"""Runs a timing command when the machine is quiet; repeats it if disturbed.

usage: bench/quiet_run.py [--idle 0.7] [--max-background 0.3] [--tries 4]
                          [--max-wait 300] -- COMMAND [ARGS...]

On a machine shared with other work (compiles, test suites), a timing is only
worth keeping if nothing else ran meanwhile. Before each try this waits (up to
--max-wait seconds) until the CPUs have been at least --idle idle over one
second (/proc/stat); after the try it computes the CPU time the rest of the
machine used while COMMAND ran (all CPU time in /proc/stat minus COMMAND's own
and its children's, from getrusage) and, if that exceeds --max-background
cores on average, discards the output and tries again. The output of the kept
try is passed through; a line on stderr reports the background load
("quiet_run: background 0.03 cores over 6.1 s, try 1"). After --tries
disturbed tries the last one is kept and flagged "DISTURBED". The defaults can also be set in the environment
(QUIET_IDLE, QUIET_MAX_BACKGROUND, QUIET_TRIES, QUIET_MAX_WAIT).
"""
import argparse
import os
import resource
import subprocess
import sys
import time


def cpu_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, sum(v[:8])


def wait_quiet(idle_frac, max_wait):
    t_end = time.time() + max_wait
    while True:
        b0, t0 = cpu_jiffies()
        time.sleep(1.0)
        b1, t1 = cpu_jiffies()
        if t1 == t0 or 1 - (b1 - b0) / (t1 - t0) >= idle_frac or time.time() > t_end:
            return


def main():
    ap = argparse.ArgumentParser()
    env = os.environ.get
    ap.add_argument("--idle", type=float, default=float(env("QUIET_IDLE", "0.7")))
    ap.add_argument("--max-background", type=float,
                    default=float(env("QUIET_MAX_BACKGROUND", "0.3")))
    ap.add_argument("--tries", type=int, default=int(env("QUIET_TRIES", "4")))
    ap.add_argument("--max-wait", type=float, default=float(env("QUIET_MAX_WAIT", "300")))
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    hz = os.sysconf("SC_CLK_TCK")
    for attempt in range(1, a.tries + 1):
        wait_quiet(a.idle, a.max_wait)
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        b0, _ = cpu_jiffies()
        w0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - w0
        b1, _ = cpu_jiffies()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        background = max(0.0, (b1 - b0) / hz - ours) / max(wall, 1e-9)
        ok = background <= a.max_background
        if ok or attempt == a.tries or p.returncode != 0:
            sys.stdout.write(p.stdout)
            sys.stderr.write(p.stderr)
            sys.stderr.write("quiet_run: background %.2f cores over %.1f s, try %d%s\n" %
                             (background, wall, attempt, "" if ok else " DISTURBED"))
            sys.exit(p.returncode)


if __name__ == "__main__":
    main()
