"""Checks a pipeline report (fsdp-pipeline pp=P cluster=... report=PATH)
against numbers computed here from the model's shape and the spec, not from
the simulator (docs/pipeline-parallel.md, "Simulator and sweep").

  bubble REPORT SCHEDULE P M TOL [V]
      every stage's bubble_fraction is (P-1)/(V M) within TOL relative
      (Narayanan et al., SC'21, sec. 2.2: GPipe and 1F1B, V = 1; sec. 2.2.2:
      the interleaved schedule with V chunks per rank; equal stages, free
      transfers).
  gather-waits TRACE
      in a pipeline's simulated trace (fsdp-pipeline trace=PATH), the
      seconds each stage's compute stream waits on its own all-gathers; ok
      when stages 1..P-1 wait none: a stage whose units are gathered once per
      step issues its gathers at the step start (Megatron-LM's interleaved
      schedule syncs chunks 0 and 1 before the first micro-batch), and they
      complete while the stage waits for its first activation (stage 0's
      gather and forward, on links as fast). Stage 0 waits for its first.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def bubble(path, schedule, p, m, tol, v=1):
    r = load(path)
    p, m, tol, v = int(p), int(m), float(tol), int(v)
    want = (p - 1) / (v * m)
    assert r["pipeline"]["stages"] == p and r["pipeline"]["schedule"] == schedule
    got = [s["bubble_fraction"] for s in r["stages"]]
    bad = [g for g in got if abs(g - want) > tol * want]
    status = "FAIL" if bad else "ok"
    print(f"{status} {schedule} P={p} m={m}{f' v={v}' if v > 1 else ''}: "
          f"bubble {r['bubble_fraction']:.4f} "
          f"(stages {' '.join('%.4f' % g for g in got)}), "
          f"(P-1)/{'(v m)' if v > 1 else 'm'} = {want:.4f}")
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


def gather_waits(path):
    events = load(path)["traceEvents"]
    waits = {}
    for e in events:
        if e.get("ph") == "X" and e["tid"] == 0:
            w = waits.setdefault(e["pid"], 0.0)
            if e["name"].startswith("wait fsdp.all_gather"):
                waits[e["pid"]] = w + e["dur"]
    ok = True
    for s, w in sorted(waits.items()):
        good = s == 0 or w == 0
        ok &= good
        print(f"{'ok' if good else 'FAIL'} stage {s}: waits {w:.1f} us on "
              f"its all-gathers")
    return ok


if __name__ == "__main__":
    cmd = sys.argv[1]
    ok = {"bubble": bubble, "p2p": p2p, "more": more, "cores": cores,
          "gather-waits": gather_waits}[cmd](*sys.argv[2:])
    sys.exit(0 if ok else 1)
