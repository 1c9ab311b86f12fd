#!/usr/bin/env python3
"""make_dense_fixtures.py — reference data for the dense model plugin (tests/test_dense.c).

Builds three tiny random models with transformers (eager attention) and writes, for each, a
Hugging Face directory tests/fixtures/dense/<name>/ holding config.json + model.safetensors (fp32)
and reference.safetensors with what transformers computes on them:

  llama   LlamaForCausalLM, untied head, rms eps 1e-5 (MiniMind2 uses Llama naming and this eps)
  qwen2   Qwen2ForCausalLM, q/k/v bias, untied head
  qwen3   Qwen3ForCausalLM, q_norm/k_norm, tied embeddings, head_dim != hidden/heads
          (minimind-3 uses Qwen3 naming)

reference.safetensors (B rows, T time, V vocab; int32 unless said):
  ids, mask, pos, targets (B,T)   a batch with left-padded rows; pos as HF computes it for left
                                  padding (cumsum(mask)-1, pads 0); targets = next id, -1 = none
  logits (B,T,V) f32              eager forward logits (pad positions included but not tested)
  logp (B,T) f32                  log softmax(logits)[targets], 0 where targets = -1
  dlogp (B,T) f32                 fixed random weights w (0 where targets = -1)
  grad.<param name> f32           d/dparam of sum(w * logp), for every parameter tensor
  gen1.prompt (1,P)  gen1.out (1,N)       greedy generate, one unpadded row
  genb.prompt, genb.mask (R,P)  genb.out (R,N)   greedy generate, left-padded batch, no EOS
  gene.eos (1)  gene.out (R,N)    same batch with an EOS id chosen so rows stop at different
                                  steps (finished rows are filled with pad id 0)

Logits, log-probs and gradients are computed in float64 (model.double()) and stored as fp32, so
the reference is the exact model and our fp32 error is what the tests measure. In float64 the
eager path turns a fully masked (padding) query row into NaN that then leaks through the values
of the next layer, so the float64 reference runs each row on its real tokens alone (positions
0..) — mathematically what the padded batch computes at real tokens; logits at padding
positions are stored as 0. Generation runs transformers' generate() as users run it (fp32,
left-padded batch); every greedy step is checked to be finite with a top-1/top-2 logit margin
> 1e-3, so fp32 rounding differences cannot flip a token.

Usage: python3 tools/make_dense_fixtures.py [OUTDIR]   (default tests/fixtures/dense)
Shared with the other model fixture scripts: hf_fixture_util.py.
"""
import copy
import os
import sys

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_fixture_util as hf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V = 128
COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=64, vocab_size=V, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=None, pad_token_id=0)

MODELS = {
    "llama": (LlamaForCausalLM, LlamaConfig(**COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False,
                                            rope_parameters={"rope_type": "default",
                                                             "rope_theta": 5000.0})),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**COMMON, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                            rope_parameters={"rope_type": "default",
                                                             "rope_theta": 20000.0})),
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(**COMMON, head_dim=16, rms_norm_eps=1e-6,
                                            tie_word_embeddings=True,
                                            rope_parameters={"rope_type": "default",
                                                             "rope_theta": 1000000.0})),
}

B, T = 3, 9
PAD = [0, 3, 1]  # left padding per row of the training batch
GEN_PAD = [0, 2, 4]  # left padding per row of the generation batch
P, N = 7, 10  # generation prompt length (with padding), new tokens


def make(name, cls, cfg, outdir, seed):
    g = torch.Generator().manual_seed(seed)
    cfg._attn_implementation = "eager"
    model = cls(cfg).eval()
    hf.randomize(model, g)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    hf.save_hf(model, d)

    # -- training batch: left-padded rows, HF positions, next-token targets
    ids, mask, pos, targets, w = hf.training_batch(g, V, T, PAD)

    dmodel = copy.deepcopy(model).double()
    logits = torch.zeros(B, T, V, dtype=torch.float64)
    for b in range(B):  # each row alone on its real tokens (see the header: NaN in padded f64)
        k = PAD[b]
        logits[b, k:] = dmodel(input_ids=ids[b:b + 1, k:]).logits[0]
    lsm = torch.log_softmax(logits, -1)
    logp = lsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * (targets >= 0)
    (w * logp).sum().backward()

    ref = {"ids": ids, "mask": mask, "pos": pos, "targets": targets,
           "logits": logits.detach(), "logp": logp.detach(), "dlogp": w}
    for pname, p in dmodel.named_parameters():
        ref["grad." + pname] = p.grad

    # -- greedy generation: one unpadded row, a left-padded batch, the batch with an EOS
    hf.generation_refs(ref, model, g, V, P, GEN_PAD, N)
    ref = hf.save_reference(ref, os.path.join(d, "reference.safetensors"))
    stops = [(r == ref["gene.eos"][0]).nonzero().flatten().tolist()[:1] for r in ref["gene.out"]]
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, "
          f"eos {ref['gene.eos'][0].item()} first at {stops}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/dense")
    torch.manual_seed(0)
    for i, (name, (cls, cfg)) in enumerate(MODELS.items()):
        make(name, cls, cfg, outdir, seed=1234 + i)


if __name__ == "__main__":
    main()
