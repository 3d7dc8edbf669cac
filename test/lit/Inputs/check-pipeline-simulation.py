"""Checks a pipeline report (fsdp-pipeline pp=P cluster=... report=PATH)
against numbers computed here from the model's shape and the spec, not from
the simulator (docs/pipeline-parallel.md, "Simulator and sweep").

  bubble REPORT SCHEDULE P M TOL
      every stage's bubble_fraction is (P-1)/M within TOL relative
      (Narayanan et al., SC'21, sec. 2.2: GPipe and 1F1B, equal stages, free
      transfers).
  p2p REPORT SPEC BATCH SEQ HIDDEN M WORLD
      each stage's p2p_bytes and p2p_s: a non-first stage receives M
      activations and a non-last stage M gradients, each the rank's slice of a
      micro-batch, BATCH/M/dp sequences x SEQ x HIDDEN f32 (dp = WORLD/P), on
      the intra-node link when the two stages' ranks share a node
      (devices_per_node), else the inter-node link: alpha + bytes / B each.
  more A B FACTOR
      report B's pipeline bubble_fraction is at least FACTOR x A's.
  cores FREE SHARED SCALE TOL
      the predicted step of report SHARED is SCALE x the sum over the stages
      of report FREE's compute_s + host_s (each stage's work with a core to
      itself), within TOL relative; SCALE = "step" compares with SCALE x
      FREE's predicted step instead. One core shared by single-rank stages
      with waiting_rank_share 0: the core is never idle while a stage works
      and a waiting stage takes none of it, so the step is the stages' work
      (processor sharing conserves work); with the constant slowdown
      (waiting_rank_share 1) it is the free step x ranks / cores.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def bubble(path, schedule, p, m, tol):
    r = load(path)
    p, m, tol = int(p), int(m), float(tol)
    want = (p - 1) / m
    assert r["pipeline"]["stages"] == p and r["pipeline"]["schedule"] == schedule
    got = [s["bubble_fraction"] for s in r["stages"]]
    bad = [g for g in got if abs(g - want) > tol * want]
    status = "FAIL" if bad else "ok"
    print(f"{status} {schedule} P={p} m={m}: bubble {r['bubble_fraction']:.4f} "
          f"(stages {' '.join('%.4f' % g for g in got)}), (P-1)/m = {want:.4f}")
    return not bad


def p2p(path, spec_path, batch, seq, hidden, m, world):
    r, spec = load(path), load(spec_path)
    batch, seq, hidden, m, world = map(int, (batch, seq, hidden, m, world))
    p = r["pipeline"]["stages"]
    n = world // p
    dpn = spec["devices_per_node"]
    per = batch // m // n * seq * hidden * 4

    def link(a, b):
        cross = any(rk // dpn != (rk + (b - a) * n) // dpn
                    for rk in range(a * n, (a + 1) * n))
        l = spec["inter_node" if cross else "intra_node"]
        return l["latency_s"] + per / l["bus_bandwidth"], cross

    ok = True
    for s, st in enumerate(r["stages"]):
        sent = m * per * ((s > 0) + (s < p - 1))
        t = 0.0
        links = []
        if s > 0:
            dt, c = link(s - 1, s)
            t += m * dt
            links.append("inter" if c else "intra")
        if s < p - 1:
            dt, c = link(s + 1, s)
            t += m * dt
            links.append("inter" if c else "intra")
        good = st["p2p_bytes"] == sent and abs(st["p2p_s"] - t) <= 1e-9 * t
        ok &= good
        print(f"{'ok' if good else 'FAIL'} stage {s}: p2p_bytes "
              f"{st['p2p_bytes']} (want {sent}), p2p_s {st['p2p_s']:.6g} "
              f"(want {t:.6g}, {'+'.join(links)})")
    return ok


def more(a, b, factor):
    x, y = load(a)["bubble_fraction"], load(b)["bubble_fraction"]
    good = y >= float(factor) * x and load(b)["p2p_exposed_s"] > 0
    print(f"{'ok' if good else 'FAIL'} slow p2p: bubble {y:.4f} vs {x:.4f}")
    return good


def cores(free, shared, scale, tol):
    f, g = load(free), load(shared)
    if scale == "step":
        want, what = 2 * f["predicted_step_time_s"], "2 x the free step"
    else:
        want = float(scale) * sum(st["compute_s"] + st.get("host_s", 0.0)
                                  for st in f["stages"])
        what = f"{scale} x the stages' work"
    got = g["predicted_step_time_s"]
    good = abs(got - want) <= float(tol) * want
    print(f"{'ok' if good else 'FAIL'} shared cores: step {got:.6g} s, "
          f"{what} {want:.6g} s")
    return good


if __name__ == "__main__":
    cmd = sys.argv[1]
    ok = {"bubble": bubble, "p2p": p2p, "more": more,
           "cores": cores}[cmd](*sys.argv[2:])
    sys.exit(0 if ok else 1)
