"""hf_fixture_util.py — pieces shared by the model fixture scripts (make_dense_fixtures.py,
make_moe_fixtures.py, make_reward_model_fixtures.py): random weights, the left-padded training
batch with Hugging Face positions, greedy generation with a margin check, and writing a
Hugging Face directory and a reference.safetensors.

Every function that draws random numbers takes the torch.Generator g and draws in a fixed
order, so a script that calls them in the same order writes the same bytes.
"""
import os

import torch
from safetensors.torch import save_file


def randomize(model, g, special=None):
    """Weights big enough that logits are spread out (std ~1), one draw per parameter in
    named_parameters() order: norms 1 + 0.2 N(0,1), biases 0.1 N(0,1), other tensors
    N(0,1) / sqrt(fan in). special(name, shape, g), when given, may return the tensor for a
    parameter instead (routers, classifier heads); None keeps the rule above."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = special(name, p.shape, g) if special else None
            if t is not None:
                p.copy_(t)
            elif name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def left_padded(rows, pad):
    """ids, mask (len(rows), max(len + pad)): row i is pad[i] zeros then rows[i]."""
    ids = torch.zeros(len(rows), max(len(r) + k for r, k in zip(rows, pad)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (r, k) in enumerate(zip(rows, pad)):
        ids[i, k:k + len(r)] = torch.tensor(r)
        mask[i, k:k + len(r)] = 1
    return ids, mask


def hf_positions(mask):
    """Positions as transformers computes them for left padding: cumsum(mask) - 1, pads 0."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def training_batch(g, V, T, pad):
    """A (B,T) batch, B = len(pad), row b left-padded by pad[b] with random ids in [3,V):
    ids, mask, pos (hf_positions), targets (next id, -1 = none) and float64 weights w of the
    log-probs (0 where targets = -1)."""
    rows = [torch.randint(3, V, (T - k,), generator=g).tolist() for k in pad]
    ids, mask = left_padded(rows, pad)
    pos = hf_positions(mask)
    targets = torch.full_like(ids, -1)
    targets[:, :-1] = torch.where(mask[:, 1:] == 1, ids[:, 1:], -1)
    targets[mask == 0] = -1
    w = torch.randn(len(pad), T, generator=g, dtype=torch.float64) * (targets >= 0)
    return ids, mask, pos, targets, w


def greedy(model, ids, mask, n, eos=None):
    """transformers' greedy generate of n new tokens (R,n), finished rows padded with 0. Every
    step of a live row must be finite with a top-1/top-2 logit margin > 1e-3, so fp32 rounding
    cannot flip a token."""
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
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
    if new.shape[1] < n:  # every row stopped early
        new = torch.cat([new, torch.zeros(new.shape[0], n - new.shape[1], dtype=new.dtype)], 1)
    return new


def generation_refs(ref, model, g, V, P, gen_pad, n):
    """Adds to ref: gen1.prompt (1,P) / gen1.out (1,n) greedy on one unpadded row;
    genb.prompt, genb.mask (R,P) / genb.out (R,n) on a batch left-padded by gen_pad; gene.eos (1)
    / gene.out (R,n) on the same batch with an EOS id chosen so rows stop at different steps."""
    with torch.no_grad():
        p1 = torch.randint(3, V, (1, P), generator=g)
        ref["gen1.prompt"], ref["gen1.out"] = p1, greedy(model, p1, torch.ones_like(p1), n)
        grows = [torch.randint(3, V, (P - k,), generator=g).tolist() for k in gen_pad]
        gids, gmask = left_padded(grows, gen_pad)
        ref["genb.prompt"], ref["genb.mask"] = gids, gmask
        ref["genb.out"] = outb = greedy(model, gids, gmask, n)

        # EOS: a token of row 1 (not the pad id) whose first occurrence differs between rows, so
        # rows stop at different steps (or never); transformers fills finished rows with pad 0.
        def first(tok):
            return [next((j for j, t in enumerate(r) if t == tok), n) for r in outb.tolist()]
        eos = next(t for t in outb[1, 2:].tolist() if t != 0 and len(set(first(t))) > 1)
        ref["gene.eos"] = torch.tensor([eos])
        ref["gene.out"] = greedy(model, gids, gmask, n, eos=eos)


def save_hf(model, d):
    """model.save_pretrained(d) without generation_config.json (the plugins read none)."""
    model.save_pretrained(d)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)


def save_reference(ref, path):
    """ref as safetensors: integer tensors int32, floating ones float32, contiguous. Returns
    the converted dict."""
    ref = {k: (v.to(torch.int32) if not v.is_floating_point() else v.to(torch.float32))
           .contiguous() for k, v in ref.items()}
    save_file(ref, path)
    return ref
