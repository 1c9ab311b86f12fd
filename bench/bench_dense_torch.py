#!/usr/bin/env python3
"""bench_dense_torch.py — PyTorch/transformers side of bench/bench_dense.c, same shapes, same
threads: LlamaForCausalLM at the MiniMind2-small shape (hidden 512, 8 layers, 8/2 heads,
intermediate 1408, vocab 6400, tied head), fp32, default (sdpa) attention.

  fwd+bwd  logits -> log_softmax -> gather next-token log-probs -> mean -> backward
           (what TRL's GRPO loss does), best of --steps after one warm-up step
  decode   model.generate(R rows of P tokens, greedy, exactly N new tokens, KV cache)
  sgemm    torch.matmul (B*T,512)x(512,1408)

Usage: python3 bench/bench_dense_torch.py [--threads 1] [--batch 4] [--seq 256] [--rows 16]
                                          [--prompt 32] [--new 128] [--steps 3]
"""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

C, L, NH, NKV, HD, IM, V = 512, 8, 8, 2, 64, 1408, 6400


def fwd_flops_per_token(T):
    mm = L * (C * NH * HD * 2 + C * NKV * HD * 2 + 3 * C * IM) + C * V
    return 2 * mm + L * 2 * T * NH * HD


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("threads", 1), ("batch", 4), ("seq", 256), ("rows", 16), ("prompt", 32),
                 ("new", 128), ("steps", 3)]:
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=C, num_hidden_layers=L, num_attention_heads=NH,
                      num_key_value_heads=NKV, intermediate_size=IM, vocab_size=V,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=32768,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                      pad_token_id=0, eos_token_id=None, bos_token_id=None)
    model = LlamaForCausalLM(cfg).float()
    print(f"shape: hidden {C}, layers {L}, heads {NH}/{NKV}, intermediate {IM}, vocab {V}; "
          f"threads {a.threads}; torch {torch.__version__}, attention "
          f"{model.config._attn_implementation}")

    N = a.batch * a.seq
    x, w = torch.randn(N, C), torch.randn(IM, C)
    x @ w.T
    t0 = time.perf_counter()
    for _ in range(20):
        x @ w.T
    rate = 2 * N * C * IM * 20 / (time.perf_counter() - t0)
    print(f"sgemm ({N},{C})x({C},{IM}): {rate / 1e9:.1f} GFLOP/s")

    ids = torch.randint(0, V, (a.batch, a.seq))
    best = 1e30
    for s in range(a.steps + 1):
        t0 = time.perf_counter()
        model.zero_grad()
        logits = model(input_ids=ids).logits[:, :-1]
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        logp.mean().backward()
        dt = time.perf_counter() - t0
        if s > 0:
            best = min(best, dt)
    flops = 3 * fwd_flops_per_token(a.seq) * N
    print(f"fwd+bwd ({a.batch},{a.seq}): {best:.3f} s/step, {N / best:.0f} tokens/s, "
          f"{flops / best / 1e9:.1f} GFLOP/s (best of {a.steps})")

    prompt = torch.randint(1, V, (a.rows, a.prompt))
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                             do_sample=False, max_new_tokens=a.new, min_new_tokens=a.new,
                             pad_token_id=0)
        dt = time.perf_counter() - t0
    assert out.shape[1] == a.prompt + a.new
    print(f"decode {a.rows} rows, prompt {a.prompt}, {a.new} new: {dt:.2f} s, "
          f"{a.rows * a.new / dt:.0f} new tokens/s")


if __name__ == "__main__":
    main()
