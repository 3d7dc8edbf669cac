#!/usr/bin/env python3
"""PyTorch (transformers' GPT2LMHeadModel) as a second reference for fsdp-run.

Runs the tiny GPT-2 schedule for 2 steps on DEVICE with --data TEXT and
--dump-params (the parameters after step 1), rebuilds the model in
transformers from the dumped tensors (the schedule's FQNs are Hugging
Face's; GPT-2 ties lm_head to wte), draws step 2's windows of TEXT exactly as
fsdp-run does (runtime/docs/schedule-format.md: window g of step s starts at
hashKey(seed, 7, s, g) mod (bytes - T), splitmix64; runtime/tooling/Data.cpp)
and compares transformers' mean cross-entropy on them with fsdp-run's loss
of step 2: |a - b| / b <= 1e-4 in f32 (TF32 off).

usage: torch_reference.py FSDP_RUN GPT2_SCHEDULE.json TEXT cpu|cuda
Needs torch and transformers (bench/gpu/check.sh on the device machine; on
a development machine a venv: python3 -m venv /tmp/ref && /tmp/ref/bin/pip
install torch transformers). Exits 1 on a mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_key(*vals):
    h = 0x5EED5EED5EED5EED
    for v in vals:
        h = splitmix64(h ^ (v & M64))
    return h


K_WINDOW = 7  # Data.cpp's tag of text windows

fsdp_run, schedule, text_path, device = sys.argv[1:5]
seed = 3
tmp = tempfile.mkdtemp()
dump = os.path.join(tmp, "params.json")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def fsdp(steps, *extra):
    p = subprocess.run([fsdp_run, schedule, "--steps", str(steps), "--seed", str(seed), "--data",
                        text_path, "--device", device, *extra],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print("FAIL fsdp-run:", p.stderr)
        sys.exit(1)
    return json.loads(p.stdout.strip().splitlines()[-1])


# Step 2's loss comes from the parameters after step 1.
summary = fsdp(2)
fsdp(1, "--dump-params", dump)
params = json.load(open(dump))["params"]

with open(schedule) as f:
    sched = json.load(f)
tokens_in = next(i for i in sched["inputs"] if i["role"] == "tokens")
batch, seq = tokens_in["global_shape"]
wte, wpe = params["transformer.wte.weight"], params["transformer.wpe.weight"]
layers = len({k.split(".")[2] for k in params if k.startswith("transformer.h.")})
heads = next(i["attrs"]["num_heads"] for i in sched["instructions"] if i["op"] == "nn.attention")
config = GPT2Config(vocab_size=wte["shape"][0], n_positions=wpe["shape"][0], n_embd=wte["shape"][1],
                    n_layer=layers, n_head=heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                    tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
torch.backends.cuda.matmul.allow_tf32 = False
model = GPT2LMHeadModel(config).to(device).eval()
state = model.state_dict()
with torch.no_grad():
    for name, t in params.items():
        state[name].copy_(torch.tensor(t["data"], dtype=torch.float32).reshape(t["shape"]))
    missing = [k for k in state if k not in params and not k.endswith("attn.bias")
               and k != "lm_head.weight"]
    assert not missing, "parameters not in the dump: %s" % missing

data = open(text_path, "rb").read()
span = len(data) - seq
step = 2
windows = [hash_key(seed, K_WINDOW, step, g) % span for g in range(batch)]
tokens = torch.tensor([list(data[o:o + seq]) for o in windows], device=device)
targets = torch.tensor([list(data[o + 1:o + seq + 1]) for o in windows], device=device)
with torch.no_grad():
    logits = model(input_ids=tokens).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1)).item()
ours = summary["losses"][1]
rel = abs(loss - ours) / abs(ours)
ok = rel <= 1e-4
print("%s torch %s %s (transformers %s) loss at step 2: %.7f, fsdp-run on %s: %.7f, rel %.2e" %
      ("ok" if ok else "FAIL", torch.__version__, device, __import__("transformers").__version__,
       loss, summary["device"], ours, rel))
sys.exit(0 if ok else 1)
