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
"""
import copy
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

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


def randomize(model, g):
    """Weights big enough that logits are spread out (std ~1), so greedy margins are large."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def left_padded(rows, pad):
    ids = torch.zeros(len(rows), max(len(r) + k for r, k in zip(rows, pad)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (r, k) in enumerate(zip(rows, pad)):
        ids[i, k:k + len(r)] = torch.tensor(r)
        mask[i, k:k + len(r)] = 1
    return ids, mask


def hf_positions(mask):
    pos = mask.cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 0)


def greedy(model, ids, mask, eos=None):
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=N,
                         min_new_tokens=0, eos_token_id=eos, pad_token_id=0,
                         output_scores=True, return_dict_in_generate=True)
    for step, s in enumerate(out.scores):
        top = s.topk(2, dim=-1).values
        done = out.sequences[:, ids.shape[1]:ids.shape[1] + step] == (-1 if eos is None else eos)
        live = ~done.any(1)
        assert torch.isfinite(s[live]).all(), f"greedy step {step}: non-finite logits"
        margin = (top[live, 0] - top[live, 1]).min().item()
        assert margin > 1e-3, f"greedy step {step}: margin {margin} too small; change the seed"
    new = out.sequences[:, ids.shape[1]:]
    if new.shape[1] < N:  # every row stopped early
        new = torch.cat([new, torch.zeros(new.shape[0], N - new.shape[1], dtype=new.dtype)], 1)
    return new


def make(name, cls, cfg, outdir, seed):
    g = torch.Generator().manual_seed(seed)
    cfg._attn_implementation = "eager"
    model = cls(cfg).eval()
    randomize(model, g)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)

    # -- training batch: left-padded rows, HF positions, next-token targets
    rows = [torch.randint(3, V, (T - k,), generator=g).tolist() for k in PAD]
    ids, mask = left_padded(rows, PAD)
    pos = hf_positions(mask)
    targets = torch.full_like(ids, -1)
    targets[:, :-1] = torch.where(mask[:, 1:] == 1, ids[:, 1:], -1)
    targets[mask == 0] = -1
    w = torch.randn(B, T, generator=g, dtype=torch.float64) * (targets >= 0)

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
    with torch.no_grad():
        p1 = torch.randint(3, V, (1, P), generator=g)
        ref["gen1.prompt"], ref["gen1.out"] = p1, greedy(model, p1, torch.ones_like(p1))
        grows = [torch.randint(3, V, (P - k,), generator=g).tolist() for k in GEN_PAD]
        gids, gmask = left_padded(grows, GEN_PAD)
        ref["genb.prompt"], ref["genb.mask"] = gids, gmask
        ref["genb.out"] = outb = greedy(model, gids, gmask)
        # EOS: a token of row 1 (not the pad id) whose first occurrence differs between rows, so
        # rows stop at different steps (or never); transformers fills finished rows with pad 0.
        def first(tok):
            return [next((j for j, t in enumerate(r) if t == tok), N) for r in outb.tolist()]
        eos = next(t for t in outb[1, 2:].tolist() if t != 0 and len(set(first(t))) > 1)
        ref["gene.eos"] = torch.tensor([eos])
        ref["gene.out"] = greedy(model, gids, gmask, eos=eos)

    ref = {k: (v.to(torch.int32) if not v.is_floating_point() else v.to(torch.float32))
           .contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(d, "reference.safetensors"))
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
