#!/usr/bin/env python3
"""Adds training-mode dropout to a GPT-2 imported by fsdp-import (which
writes none): usage add-gpt2-dropout.py IN.mlir OUT.mlir RATE [sharded].

Where Hugging Face's GPT2Model puts it (modeling_gpt2.py): `drop` after the
token + position embeddings (embd_pdrop), `resid_dropout` after the
attention's c_proj and `dropout` after the MLP's c_proj (resid_pdrop). Under
tensor parallelism these are replicated in the group (or sequence chunks
under sequence parallelism). With `sharded` also one after each attention
output and each GELU, inside Megatron's regions (split by heads / features
across the group), where Megatron-LM draws from the model-parallel RNG
stream (attention_dropout; fsdp's nn.attention is fused and has no dropout
of the probabilities). Each site gets its own seed. The function gains the
optimizer step input (%step, nn.step) that nn.dropout reads.
"""
import re
import sys

src, dst, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
sharded = len(sys.argv) > 4 and sys.argv[4] == "sharded"
lines = open(src).read().split("\n")
out = []
seed = 0
DEF = re.compile(r"^(\s*)(%[A-Za-z0-9_]+)(.*?= nn\.([a-z_]+) .*)$")
for i, line in enumerate(lines):
    if "func.func @forward(" in line:
        # The step after the targets.
        line, n = re.subn(r'(loc\("targets"\(#loc\)\)),',
                          r'\1, %step: tensor<i64> {nn.step},', line, count=1)
        assert n == 1, "no targets argument"
    m = DEF.match(line)
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    want = False
    if m:
        op = m.group(4)
        # The c_proj linears: their result is the residual add's operand.
        want = op == "position_embedding" or (
            op == "linear" and re.search(r"= nn\.add ", nxt) is not None)
        if sharded and op in ("attention", "gelu"):
            want = True
    if not want:
        out.append(line)
        continue
    indent, name = m.group(1), m.group(2)
    if m.group(4) == "attention":
        ty = re.search(r"-> \((tensor<[^>]*>),", line).group(1)
    else:
        ty = re.findall(r"tensor<[^>]*>", line.split(" loc(")[0])[-1]
    pre = "%pre" + name[1:]
    out.append(indent + pre + m.group(3))
    seed += 1
    out.append(f"{indent}{name} = nn.dropout {pre}, %step "
               f"{{rate = {rate!r} : f64, seed = {seed} : i64}} : {ty}, tensor<i64>")
open(dst, "w").write("\n".join(out))
print(f"{seed} dropouts")
