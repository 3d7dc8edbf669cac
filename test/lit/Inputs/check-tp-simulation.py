"""Checks a report's tensor-parallel keys against Megatron's count and the
ring model, computed here from the model's shape alone.

usage: check-tp-simulation.py REPORT LAYERS HIDDEN SEQ GLOBAL_BATCH WORLD TP
                              MICRO_BATCHES ELEMENT_BYTES SPEC [ARCH [hidden]]

Bytes: without sequence parallelism each layer sends 8*b*s*h*(t-1)/t
elements per rank per micro-batch (Narayanan et al., SC'21, Sec. 3.2: two
all-reduces of b*s*h elements in forward, two in backward, each 2(t-1)/t of
its size per rank in a ring), b the micro-batch's sequences on one
data-parallel rank. Time: each of those 4*L*k all-reduces of S = b*s*h
elements takes 2*((t-1)*alpha + (t-1)/t*S/B) (Thakur, Rabenseifner & Gropp
2005), alpha and B the spec's intra-node link when t <= devices_per_node,
else its inter-node link (specs without nics_per_node or collective sync),
and blocks compute: exposed = its whole time.

With ARCH (gpt2 or llama: sequence parallelism, Korthikanti et al. 2022, Sec. 4.2.2) each
all-reduce becomes a reduce-scatter and an all-gather of (t-1)/t*S each (the
same 8*b*s*h*(t-1)/t per layer), and backward all-gathers each
column-parallel region's input again (Megatron-LM keeps only the chunk): 10
all-gathers or reduce-scatters of S per layer per micro-batch, plus 2 per
micro-batch at the ends (the LM head's all-gather in forward, the
embedding's gradient all-gather in backward). The runtime issues each as one
collective per sequence (b calls of S/b). The parameters replicated in the
group that act on sequence chunks then have partial gradients, all-reduced
over it per micro-batch (Megatron-LM's sequence-parallel gradient
all-reduce): ARCH gpt2 6L + 2 vectors of h elements (two LayerNorms' weight
and bias and two row-parallel biases per layer, ln_f's weight and bias),
llama 2L + 1 (the RMSNorm weights).

The backward's re-gathers (2 per layer per micro-batch: the attention's and
the MLP's input, R seconds in all) are issued before a grad-input GEMM and
waited at the weight gradient that reads them, as Megatron-LM overlaps them;
the other collectives block. With free compute nothing hides them (exposed
= the total); with `hidden` the spec's compute is slow enough that each GEMM
outlasts a re-gather (exposed = the total - R).
"""
import json
import sys

rep, L, h, s, B, n, t, k, eb, spec = sys.argv[1:11]
sp = len(sys.argv) > 11 and sys.argv[11] in ("gpt2", "llama")
r = json.load(open(rep))
L, h, s, B, n, t, k, eb = map(int, (L, h, s, B, n, t, k, eb))
spec = json.load(open(spec))
b = B // (n // t) // k  # sequences per micro-batch on one data-parallel rank
link = spec["intra_node"] if t <= spec["devices_per_node"] else spec["inter_node"]
S = b * s * h * eb
ring = lambda size: (t - 1) * link["latency_s"] + (t - 1) / t * size / link["bus_bandwidth"]
if sp:
    ops = (10 * L + 2) * k
    vectors = k * ((6 * L + 2) if sys.argv[11] == "gpt2" else (2 * L + 1))
    want_bytes = ops * (S // t * (t - 1)) + vectors * (2 * (t - 1) * h * eb // t)
    want_s = ops * b * ring(S / b) + vectors * 2 * ring(h * eb)
else:
    want_bytes = L * k * 8 * b * s * h * (t - 1) // t * eb
    want_s = 4 * L * k * 2 * ring(S)
hidden = sp and len(sys.argv) > 12 and sys.argv[12] == "hidden"
exposed = want_s - (2 * L * k * b * ring(S / b) if hidden else 0)
got = (r["tp_bytes"], r["per_rank"]["tp_bytes_per_step"], r["tp_comm_s"], r["tp_exposed_s"])
ok = (got[0] == want_bytes and got[1] == want_bytes
      and abs(got[2] - want_s) <= 1e-9 * want_s and abs(got[3] - exposed) <= 1e-9 * want_s
      and r["predicted_step_time_s"] >= r["compute_s"] + exposed * (1 - 1e-9))
print("%s%s tp=%d world=%d k=%d: tp_bytes %d (Megatron %d), tp_comm_s %.6g (ring %.6g), "
      "exposed %.6g (model %.6g)" % ("ok" if ok else "FAIL", " sp" if sp else "", t, n, k, got[0], want_bytes, got[2], want_s, got[3], exposed))
sys.exit(0 if ok else 1)
