"""Checks the memory plan's activations per transformer layer under tensor
parallelism against Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models"), Table 2, computed here from the
model's shape alone.

usage: check-tp-activations.py ARCH HIDDEN SEQ BATCH HEADS KV_HEADS
                               INTERMEDIATE ELEMENT_BYTES TP REPORT_1 REPORT_2
                               [sp]

ARCH gpt2 (GELU MLP) or llama (SwiGLU MLP); BATCH the sequences of one
data-parallel rank; REPORT_1 and REPORT_2 the plans (report=) of the same
model with 1 and 2 layers: a layer's activations are the difference of their
per_rank.max_bytes_by_class.activation (the activations held at the end of
forward). Table 2 without sequence parallelism: s*b*h*(10 + 24/t + 5*a*s/(h*t))
bytes for 16-bit activations, of which replicated in the tensor-parallel
group: 4sbh for the two norms' inputs, 2sbh + 2sbh for the attention's and
the MLP's inputs (the norms' outputs), 2sbh for two dropout masks; split
(1/t): Q, K, V and the attention output (4 x 2sbh), the MLP's up-projection
and GELU outputs (2 x 8sbh), and 5as^2b for the softmax, its dropout mask and
output. The models here have no dropout (no masks), attention keeps its
log-sum-exp statistics (4 bytes per head and row) instead of the softmax,
grouped-query attention has K and V of kv_heads heads, and a SwiGLU MLP holds
four intermediate-sized tensors (gate, up, SiLU(gate), their product) where
GELU's holds two. Element bytes e replace Table 2's 2.

With `sp` (the plans made with sequence-parallel=true): Table 2 with
sequence parallelism, sbh(34/t + 5as/(ht)): the replicated 10sbh becomes
10sbh/t (the norms' inputs and outputs and the masks on sequence chunks;
fsdp-autodiff re-gathers the column-parallel linears' inputs in backward, so
only the chunk is kept), the same adaptation giving 4·e·sbh/t, plus 2·e·h
bytes Table 2 does not count: the two norms' weights, which the norms on
chunks read through f (nn.tp_copy, whose VJP all-reduces their gradient over
the group) and whose backward keeps that copy, an activation of h elements
each (without sequence parallelism the norm reads the parameter itself).
"""
import json
import sys

arch, h, s, b, a, kv, i, e, t = sys.argv[1], *map(int, sys.argv[2:10])
r1, r2 = (json.load(open(p)) for p in sys.argv[10:12])
sp = len(sys.argv) > 12 and sys.argv[12] == "sp"
plan = (r2["per_rank"]["max_bytes_by_class"]["activation"]
        - r1["per_rank"]["max_bytes_by_class"]["activation"])
hkv = h // a * kv
replicated = 4 * e * s * b * h
if sp:
    replicated = replicated // t + 2 * e * h
attention = e * s * b * (2 * h + 2 * hkv) // t + 4 * a * s * b // t
mlp = (2 if arch == "gpt2" else 4) * e * s * b * i // t
want = replicated + attention + mlp
print("%s %s t=%d%s: plan %d bytes per layer, Table 2 %d (replicated %d, split %d)"
      % ("ok" if plan == want else "FAIL", arch, t, " sp" if sp else "", plan, want, replicated, want - replicated))
sys.exit(0 if plan == want else 1)
