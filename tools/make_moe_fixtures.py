#!/usr/bin/env python3
"""make_moe_fixtures.py — reference data for the MoE model plugin (tests/test_moe.c).

Writes, for each tiny random model, a Hugging Face directory tests/fixtures/moe/<name>/ with
config.json + model.safetensors (fp32) and reference.safetensors:

  qwen3moe   transformers' Qwen3MoeForCausalLM (eager attention): q/k norm, 4 experts, top-2,
             norm_topk_prob, untied head, router_aux_loss_coef 0.05 (large so the aux gradient
             is visible next to the log-prob gradient). The aux loss is transformers' own
             load_balancing_loss_func over the router logits of every layer (output_router_logits).
  qwen3moe_plain  Qwen3MoeForCausalLM, 1 layer, 3 experts top-2 WITHOUT norm_topk_prob (raw
             softmax weights), tied head, router_aux_loss_coef 0.1.
  minimind2  MiniMind2 MoE (model_type "minimind", use_moe): Llama attention, tied head, 4 routed
             experts top-2 with norm_topk_prob (÷ sum + 1e-20), 1 shared expert added unweighted,
             seq_aux = true, aux_loss_alpha 0.1.
  minimind2_tok  the same with seq_aux = false, 3 routed experts, top-1 (so no normalisation),
             2 shared experts, aux_loss_alpha 0.2.

MiniMind2's MoE is not in transformers: MiniMindMoE below is a PyTorch reference written from the
formulas (the MLP of a LlamaForCausalLM replaced by it; the rest of MiniMind2 is Llama's math):
  scores = softmax(x @ gate^T) (N,E); w, idx = topk(scores, K); if K > 1 and norm_topk_prob:
  w /= sum(w) + 1e-20; y = sum_k w_k expert_{idx_k}(x) + sum_s shared_s(x)
  aux per layer, seq_aux:   alpha * mean_b sum_e [count_b,e / (S_b K / E)] * mean_t scores_b,t,e
                 token form: alpha * sum_e [count_e / (N K)] * E * mean_n scores_n,e
  total aux = sum over layers. Counts and means run over REAL tokens only (S_b = real tokens of
  row b; MiniMind itself averages over padding too — identical when a batch has no padding; we
  mask because padded positions' hidden states are not part of the model's meaning).
The Qwen3-MoE aux (transformers): E * sum_e F_e P_e with F_e, P_e the top-k assignment count
and the mean probability of expert e over every (layer, real token), coefficient
router_aux_loss_coef.

reference.safetensors (B rows, T time, V vocab; int32 unless said):
  ids, mask, pos, targets (B,T)   left-padded batch, HF positions, next-token targets (-1 = none)
  logits (B,T,V) f32, logp (B,T) f32, dlogp (B,T) f32 (random weights w)
  aux (1) f32                     coefficient * aux loss (what the plugin's aux_loss() returns)
  load (L,E) f32                  tokens routed to each expert per layer (real tokens)
  grad.<param> f32                d/dparam of sum(w * logp) + aux, every parameter tensor
  auxgrad.<router param> f32      d aux / d mlp.gate.weight of every layer (aux alone)
  gen1.*, genb.*, gene.*          greedy generate, as in make_dense_fixtures.py

Everything differentiated runs in float64 with each row alone on its real tokens (the fp64 eager
path turns fully masked padding rows into NaN), stored as fp32. Every real token of the batch has
a top-k margin (k-th minus (k+1)-th router probability) > 1e-3 in every layer, so fp32 cannot
route differently; the seed is advanced until that holds. Greedy generation runs in fp32 as users
run it, each step with a top-1/top-2 logit margin > 1e-3.

Usage: python3 tools/make_moe_fixtures.py [OUTDIR]   (default tests/fixtures/moe)
"""
import copy
import json
import os
import sys

import torch
from safetensors.torch import save_file
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V = 64
B, T = 3, 9
PAD = [0, 3, 1]
GEN_PAD = [0, 2, 4]
P, N = 7, 10
MARGIN = 1e-3


# ---- MiniMind2 MoE reference ----------------------------------------------------------------
class SwiGLU(nn.Module):
    def __init__(self, C, I):
        super().__init__()
        self.gate_proj = nn.Linear(C, I, bias=False)
        self.up_proj = nn.Linear(C, I, bias=False)
        self.down_proj = nn.Linear(I, C, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MiniMindMoE(nn.Module):
    """Routed experts (softmax top-k) + shared experts; records (scores, idx) for the aux loss."""

    def __init__(self, C, I, E, K, n_shared, norm_topk):
        super().__init__()
        self.E, self.K, self.norm_topk = E, K, norm_topk
        self.gate = nn.Linear(C, E, bias=False)
        self.experts = nn.ModuleList([SwiGLU(C, I) for _ in range(E)])
        self.shared_experts = nn.ModuleList([SwiGLU(C, I) for _ in range(n_shared)])
        self.record = []

    def forward(self, x):
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        scores = torch.softmax(self.gate(xf), dim=-1)
        w, idx = torch.topk(scores, self.K, dim=-1)
        if self.K > 1 and self.norm_topk:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        y = torch.zeros_like(xf)
        for e in range(self.E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if len(tok):
                y = y.index_add(0, tok, self.experts[e](xf[tok]) * w[tok, slot, None])
        for s in self.shared_experts:
            y = y + s(xf)
        self.record.append((scores, idx))
        return y.view(shape)


def minimind_aux(layers, E, K, alpha, seq_aux):
    """Sum over layers of MiniMind2's aux loss; layer records hold one (scores, idx) per row."""
    total = 0
    for rec in layers:
        if seq_aux:
            per_row = []
            for scores, idx in rec:
                S = scores.shape[0]
                ce = torch.bincount(idx.reshape(-1), minlength=E).to(scores.dtype) / (S * K / E)
                per_row.append((ce * scores.mean(0)).sum())
            total = total + alpha * torch.stack(per_row).mean()
        else:
            scores = torch.cat([s for s, _ in rec])
            idx = torch.cat([i for _, i in rec])
            ce = torch.bincount(idx.reshape(-1), minlength=E).to(scores.dtype) / idx.numel()
            total = total + alpha * (scores.mean(0) * ce * E).sum()
    return total


class MiniMind2(nn.Module):
    """A LlamaForCausalLM (MiniMind2's attention/norm/RoPE math) whose MLPs are MiniMindMoE."""

    def __init__(self, mc):
        super().__init__()
        self.mc = mc
        lc = LlamaConfig(hidden_size=mc["hidden_size"], num_hidden_layers=mc["num_hidden_layers"],
                         num_attention_heads=mc["num_attention_heads"],
                         num_key_value_heads=mc["num_key_value_heads"],
                         intermediate_size=mc["intermediate_size"], vocab_size=mc["vocab_size"],
                         rms_norm_eps=mc["rms_norm_eps"], max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=None,
                         pad_token_id=0,
                         rope_parameters={"rope_type": "default", "rope_theta": mc["rope_theta"]})
        lc._attn_implementation = "eager"
        self.lm = LlamaForCausalLM(lc).eval()
        for layer in self.lm.model.layers:
            layer.mlp = MiniMindMoE(mc["hidden_size"], mc["intermediate_size"],
                                    mc["n_routed_experts"], mc["num_experts_per_tok"],
                                    mc["n_shared_experts"], mc["norm_topk_prob"])

    def moes(self):
        return [layer.mlp for layer in self.lm.model.layers]


# ---- shared helpers -------------------------------------------------------------------------
def randomize(model, g):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("mlp.gate.weight"):  # routers: spread probabilities (margins)
                p.copy_(3.0 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
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
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


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
        assert margin > 1e-3, f"greedy step {step}: margin {margin} too small"
    new = out.sequences[:, ids.shape[1]:]
    if new.shape[1] < N:
        new = torch.cat([new, torch.zeros(new.shape[0], N - new.shape[1], dtype=new.dtype)], 1)
    return new


def topk_margin(probs, K):
    s = probs.sort(-1, descending=True).values
    return (s[:, K - 1] - s[:, K]).min().item() if s.shape[1] > K else 1.0


# ---- per-flavour forward of one real-token row (float64) ------------------------------------
def qwen_row(model, ids):
    out = model(input_ids=ids, output_router_logits=True)
    return out.logits[0], list(out.router_logits)  # router logits per layer (S,E)


def make(name, flavour, outdir, seed):
    for attempt in range(50):
        g = torch.Generator().manual_seed(seed + 1000 * attempt)
        if flavour.startswith("qwen3moe"):
            plain = flavour == "qwen3moe_plain"
            cfg = Qwen3MoeConfig(hidden_size=32, num_hidden_layers=1 if plain else 2,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                 intermediate_size=48, moe_intermediate_size=16,
                                 num_experts=3 if plain else 4, num_experts_per_tok=2,
                                 norm_topk_prob=not plain,
                                 router_aux_loss_coef=0.1 if plain else 0.05, vocab_size=V,
                                 max_position_embeddings=256, rms_norm_eps=1e-6,
                                 tie_word_embeddings=plain, bos_token_id=1, eos_token_id=None,
                                 pad_token_id=0,
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
            cfg._attn_implementation = "eager"
            cfg._experts_implementation = "eager"  # the per-expert loop (fp64-capable)
            model = Qwen3MoeForCausalLM(cfg).eval()
            E, K, coef = cfg.num_experts, 2, cfg.router_aux_loss_coef
        else:
            tok = flavour == "minimind2_tok"
            mc = dict(architectures=["MiniMindForCausalLM"], model_type="minimind",
                      hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=16, vocab_size=V,
                      rms_norm_eps=1e-5, rope_theta=1e6, max_position_embeddings=256,
                      hidden_act="silu", dropout=0.0, flash_attn=True, bos_token_id=1,
                      eos_token_id=2, use_moe=True, num_experts_per_tok=1 if tok else 2,
                      n_routed_experts=3 if tok else 4, n_shared_experts=2 if tok else 1,
                      scoring_func="softmax", aux_loss_alpha=0.2 if tok else 0.1,
                      seq_aux=not tok, norm_topk_prob=True, torch_dtype="float32")
            model = MiniMind2(mc)
            E, K, coef = mc["n_routed_experts"], mc["num_experts_per_tok"], mc["aux_loss_alpha"]
        randomize(model, g)
        rows = [torch.randint(3, V, (T - k,), generator=g).tolist() for k in PAD]
        ids, mask = left_padded(rows, PAD)
        pos = hf_positions(mask)
        targets = torch.full_like(ids, -1)
        targets[:, :-1] = torch.where(mask[:, 1:] == 1, ids[:, 1:], -1)
        targets[mask == 0] = -1
        w = torch.randn(B, T, generator=g, dtype=torch.float64) * (targets >= 0)

        dmodel = copy.deepcopy(model).double()
        logits = torch.zeros(B, T, V, dtype=torch.float64)
        router = []  # per row: list over layers of (scores (S,E), idx (S,K))
        for b in range(B):
            k = PAD[b]
            if flavour.startswith("qwen3moe"):
                lg, rl = qwen_row(dmodel, ids[b:b + 1, k:])
                probs = [torch.softmax(r, -1) for r in rl]
                router.append((rl, [(p, p.topk(K, -1).indices) for p in probs]))
            else:
                for moe in dmodel.moes():
                    moe.record = []
                lg = dmodel.lm(input_ids=ids[b:b + 1, k:]).logits[0]
                router.append((None, [moe.record[0] for moe in dmodel.moes()]))
            logits[b, k:] = lg
        margin = min(topk_margin(p, K) for _, layers in router for p, _ in layers)
        if margin > MARGIN:
            break
        print(f"{name}: seed attempt {attempt}: router top-{K} margin {margin:.2g}, retrying")
    else:
        raise SystemExit(f"{name}: no seed gives router margins > {MARGIN}")

    L = len(router[0][1])
    if flavour.startswith("qwen3moe"):
        per_layer = tuple(torch.cat([router[b][0][l] for b in range(B)]) for l in range(L))
        aux = coef * load_balancing_loss_func(per_layer, E, K, None)
        gates = [dmodel.model.layers[l].mlp.gate.weight for l in range(L)]
        gate_names = [f"model.layers.{l}.mlp.gate.weight" for l in range(L)]
        pnames = dict(dmodel.named_parameters())
        # transformers 5 keeps experts fused (E,2I,C)/(E,C,I); on disk they are per expert
    else:
        layers = [[router[b][1][l] for b in range(B)] for l in range(L)]
        aux = minimind_aux(layers, E, K, coef, mc["seq_aux"])
        gates = [m.gate.weight for m in dmodel.moes()]
        gate_names = [f"model.layers.{l}.mlp.gate.weight" for l in range(L)]
    load = torch.zeros(L, E)
    for l in range(L):
        for b in range(B):
            load[l] += torch.bincount(router[b][1][l][1].reshape(-1), minlength=E).float()

    lsm = torch.log_softmax(logits, -1)
    logp = lsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * (targets >= 0)
    auxgrads = torch.autograd.grad(aux, gates, retain_graph=True)
    ((w * logp).sum() + aux).backward()

    ref = {"ids": ids, "mask": mask, "pos": pos, "targets": targets, "logits": logits.detach(),
           "logp": logp.detach(), "dlogp": w, "aux": aux.detach().reshape(1), "load": load}
    for gn, ag in zip(gate_names, auxgrads):
        ref["auxgrad." + gn] = ag
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    if flavour.startswith("qwen3moe"):
        model.save_pretrained(d)
        gc = os.path.join(d, "generation_config.json")
        if os.path.exists(gc):
            os.remove(gc)
        I = cfg.moe_intermediate_size
        for pname, p in pnames.items():
            if pname.endswith("mlp.experts.gate_up_proj"):
                base = pname[:-len("gate_up_proj")]
                for e in range(E):
                    ref[f"grad.{base}{e}.gate_proj.weight"] = p.grad[e, :I]
                    ref[f"grad.{base}{e}.up_proj.weight"] = p.grad[e, I:]
            elif pname.endswith("mlp.experts.down_proj"):
                base = pname[:-len("down_proj")]
                for e in range(E):
                    ref[f"grad.{base}{e}.down_proj.weight"] = p.grad[e]
            else:
                ref["grad." + pname] = p.grad
        genmodel = model
    else:
        sd = {k[len("lm."):] if k.startswith("lm.") else k: v.contiguous()
              for k, v in model.state_dict().items() if k != "lm.lm_head.weight"}
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(mc, f, indent=2)
        for pname, p in dmodel.named_parameters():  # lm_head is tied: embed_tokens holds both
            ref["grad." + pname[len("lm."):]] = p.grad
        genmodel = model.lm

    with torch.no_grad():
        p1 = torch.randint(3, V, (1, P), generator=g)
        ref["gen1.prompt"], ref["gen1.out"] = p1, greedy(genmodel, p1, torch.ones_like(p1))
        grows = [torch.randint(3, V, (P - k,), generator=g).tolist() for k in GEN_PAD]
        gids, gmask = left_padded(grows, GEN_PAD)
        ref["genb.prompt"], ref["genb.mask"] = gids, gmask
        ref["genb.out"] = outb = greedy(genmodel, gids, gmask)

        def first(tok):
            return [next((j for j, t in enumerate(r) if t == tok), N) for r in outb.tolist()]
        eos = next(t for t in outb[1, 2:].tolist() if t != 0 and len(set(first(t))) > 1)
        ref["gene.eos"] = torch.tensor([eos])
        ref["gene.out"] = greedy(genmodel, gids, gmask, eos=eos)

    ref = {k: (v.to(torch.int32) if not v.is_floating_point() else v.to(torch.float32))
           .contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(d, "reference.safetensors"))
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, router margin "
          f"{margin:.3g}, aux {ref['aux'].item():.5g}, load {load.tolist()}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/moe")
    torch.manual_seed(0)
    for i, name in enumerate(["qwen3moe", "minimind2", "minimind2_tok", "qwen3moe_plain"]):
        make(name, name, outdir, seed=4321 + i)


if __name__ == "__main__":
    main()
