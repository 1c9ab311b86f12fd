#!/usr/bin/env python3
"""bench_moe_torch.py — PyTorch side of bench/bench_moe.c, same shapes, same threads: the
MiniMind2-MoE reference of tools/make_moe_fixtures.py (a transformers LlamaForCausalLM whose MLPs
are MiniMind2 MoE blocks: per-expert gather -> SwiGLU -> index_add, like MiniMind's and
transformers' own MoE loops) at hidden 640, 8 layers, 8/2 heads, expert intermediate 1728,
4 routed experts top-2 + 1 shared, vocab 6400, tied head, fp32, sdpa attention.

  fwd+bwd  logits -> log_softmax -> gather next-token log-probs -> mean, + seq_aux aux loss
           (alpha 0.1) -> backward; best of --steps after one warm-up step
  decode   model.generate(R rows of P tokens, greedy, exactly N new tokens, KV cache)

Usage: python3 bench/bench_moe_torch.py [--threads 1] [--batch 4] [--seq 256] [--rows 16]
                                        [--prompt 32] [--new 128] [--steps 3]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from make_moe_fixtures import MiniMind2  # noqa: E402

C, L, NH, NKV, HD, IM, E, K, NS, V = 640, 8, 8, 2, 80, 1728, 4, 2, 1, 6400
ALPHA = 0.1


def fwd_flops_per_token(T):
    mm = L * (C * NH * HD * 2 + C * NKV * HD * 2 + E * C + 3 * C * IM * (K + NS)) + C * V
    return 2 * mm + L * 2 * T * NH * HD


def seq_aux(moes, B, T):
    """MiniMind2's seq_aux loss of the last forward, summed over layers (no padding here)."""
    total = 0
    for moe in moes:
        scores, idx = moe.record[-1]
        scores, idx = scores.view(B, T, E), idx.view(B, T * K)
        ce = torch.zeros(B, E).scatter_add_(1, idx, torch.ones(B, T * K)) / (T * K / E)
        total = total + ALPHA * (ce * scores.mean(1)).sum(1).mean()
        moe.record = []
    return total


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("threads", 1), ("batch", 4), ("seq", 256), ("rows", 16), ("prompt", 32),
                 ("new", 128), ("steps", 3)]:
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    mc = dict(hidden_size=C, num_hidden_layers=L, num_attention_heads=NH, num_key_value_heads=NKV,
              intermediate_size=IM, vocab_size=V, rms_norm_eps=1e-5, rope_theta=1e6,
              n_routed_experts=E, num_experts_per_tok=K, n_shared_experts=NS, norm_topk_prob=True)
    model = MiniMind2(mc)
    model.lm.config._attn_implementation = "sdpa"
    lm = model.lm.float()
    print(f"shape: hidden {C}, layers {L}, heads {NH}/{NKV}, expert intermediate {IM}, {E} routed "
          f"top-{K} + {NS} shared, vocab {V}; threads {a.threads}; torch {torch.__version__}")

    B, T = a.batch, a.seq
    N = B * T
    ids = torch.randint(0, V, (B, T))
    best = 1e30
    for s in range(a.steps + 1):
        t0 = time.perf_counter()
        lm.zero_grad()
        logits = lm(input_ids=ids).logits[:, :-1]
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        aux = seq_aux(model.moes(), B, T)
        (logp.mean() + aux).backward()
        dt = time.perf_counter() - t0
        if s > 0:
            best = min(best, dt)
    flops = 3 * fwd_flops_per_token(T) * N
    print(f"aux {aux.item():.4f}")
    print(f"fwd+bwd ({B},{T}): {best:.3f} s/step, {N / best:.0f} tokens/s, "
          f"{flops / best / 1e9:.1f} GFLOP/s (best of {a.steps})")

    prompt = torch.randint(1, V, (a.rows, a.prompt))
    with torch.no_grad():
        t0 = time.perf_counter()
        out = lm.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                          do_sample=False, max_new_tokens=a.new, min_new_tokens=a.new,
                          pad_token_id=0)
        dt = time.perf_counter() - t0
    assert out.shape[1] == a.prompt + a.new
    print(f"decode {a.rows} rows, prompt {a.prompt}, {a.new} new: {dt:.2f} s, "
          f"{a.rows * a.new / dt:.0f} new tokens/s")


if __name__ == "__main__":
    main()
