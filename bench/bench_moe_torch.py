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
The harness (arguments, fwd+bwd and decode loops) is bench_torch_util.py.
"""
import os
import sys

import torch

import bench_torch_util as bench

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
    a = bench.parse_args()
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
    auxes = []

    def aux_loss():
        auxes[:] = [seq_aux(model.moes(), B, T)]  # the last step's, for the print
        return auxes[-1]

    best = bench.fwd_bwd(lm, ids, a.steps, aux_loss)
    print(f"aux {auxes[-1].item():.4f}")
    bench.print_fwd_bwd(a, best, 3 * fwd_flops_per_token(T) * N)
    bench.decode(lm, a, V)

if __name__ == "__main__":
    main()
