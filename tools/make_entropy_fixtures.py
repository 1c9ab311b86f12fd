#!/usr/bin/env python3
"""make_entropy_fixtures.py — reference gradients of the entropy bonus (grpo.entropy_coef) for
tests/test_dense.c, from transformers on the dense fixtures that make_dense_fixtures.py wrote.

For tests/fixtures/dense/{llama,qwen3}/ (an untied and a tied head) it loads the Hugging Face
directory and the training batch of reference.safetensors, and writes entropy.safetensors:

  scale (1) f32                 s, the logit scale (1 / sampling temperature) = 0.7
  dlogp (B,T) f32               the batch's weights w of the log-probs (reference.safetensors)
  dentropy (B,T) f32            fixed random weights u of the entropies (0 where targets = -1)
  logp (B,T), entropy (B,T) f32 log softmax(s z)[target] and -sum p log p of softmax(s z)
  grad.<param name> f32         d/dparam of sum(w * logp + u * entropy), every parameter

in float64, each row alone on its real tokens (as make_dense_fixtures.py does, see its header).

Usage: python3 tools/make_entropy_fixtures.py [DIR]   (default tests/fixtures/dense)
"""
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_fixture_util as hf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE = 0.7


def make(d, seed):
    ref = load_file(os.path.join(d, "reference.safetensors"))
    ids, mask, targets = ref["ids"].long(), ref["mask"], ref["targets"].long()
    B, T = ids.shape
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager").double().eval()
    g = torch.Generator().manual_seed(seed)
    has = (targets >= 0).double()
    w = ref["dlogp"].double() * has
    u = torch.randn(B, T, generator=g, dtype=torch.float64) * has
    V = model.config.vocab_size
    logits = torch.zeros(B, T, V, dtype=torch.float64)
    for b in range(B):  # each row alone on its real tokens (see make_dense_fixtures.py)
        k = int((mask[b] == 0).sum())
        logits[b, k:] = model(input_ids=ids[b:b + 1, k:]).logits[0]
    lsm = torch.log_softmax(SCALE * logits, -1)
    logp = lsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * has
    entropy = -(lsm.exp() * lsm).sum(-1) * has
    (w * logp + u * entropy).sum().backward()
    out = {"scale": torch.tensor([SCALE]), "dlogp": w, "dentropy": u,
           "logp": logp.detach(), "entropy": entropy.detach()}
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad
    hf.save_reference(out, os.path.join(d, "entropy.safetensors"))
    print(f"{d}: |u| max {u.abs().max():.3f}, entropy mean {entropy.sum() / has.sum():.3f}")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/dense")
    for i, name in enumerate(["llama", "qwen3"]):
        make(os.path.join(root, name), seed=4321 + i)


if __name__ == "__main__":
    main()
