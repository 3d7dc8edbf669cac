"""Checks a report's tensor-parallel keys against Megatron's count and the
ring model, computed here from the model's shape alone.

usage: check-tp-simulation.py REPORT LAYERS HIDDEN SEQ GLOBAL_BATCH WORLD TP
                              MICRO_BATCHES ELEMENT_BYTES SPEC

Bytes: without sequence parallelism each layer sends 8*b*s*h*(t-1)/t
elements per rank per micro-batch (Narayanan et al., SC'21, Sec. 3.2: two
all-reduces of b*s*h elements in forward, two in backward, each 2(t-1)/t of
its size per rank in a ring), b the micro-batch's sequences on one
data-parallel rank. Time: each of those 4*L*k all-reduces of S = b*s*h
elements takes 2*((t-1)*alpha + (t-1)/t*S/B) (Thakur, Rabenseifner & Gropp
2005), alpha and B the spec's intra-node link when t <= devices_per_node,
else its inter-node link (specs without nics_per_node or collective sync),
and blocks compute: exposed = its whole time.
"""
import json
import sys

rep, L, h, s, B, n, t, k, eb, spec = sys.argv[1:11]
r = json.load(open(rep))
L, h, s, B, n, t, k, eb = map(int, (L, h, s, B, n, t, k, eb))
spec = json.load(open(spec))
b = B // (n // t) // k  # sequences per micro-batch on one data-parallel rank
want_bytes = L * k * 8 * b * s * h * (t - 1) // t * eb
link = spec["intra_node"] if t <= spec["devices_per_node"] else spec["inter_node"]
S = b * s * h * eb
one = 2 * ((t - 1) * link["latency_s"] + (t - 1) / t * S / link["bus_bandwidth"])
want_s = 4 * L * k * one
got = (r["tp_bytes"], r["per_rank"]["tp_bytes_per_step"], r["tp_comm_s"], r["tp_exposed_s"])
ok = (got[0] == want_bytes and got[1] == want_bytes
      and abs(got[2] - want_s) <= 1e-9 * want_s and abs(got[3] - want_s) <= 1e-9 * want_s
      and r["predicted_step_time_s"] >= r["compute_s"] + want_s * (1 - 1e-9))
print("%s tp=%d world=%d k=%d: tp_bytes %d (Megatron %d), tp_comm_s %.6g (ring %.6g), "
      "exposed %.6g" % ("ok" if ok else "FAIL", t, n, k, got[0], want_bytes, got[2], want_s, got[3]))
sys.exit(0 if ok else 1)
