#!/usr/bin/env python3
"""bench_gpu_torch.py — the PyTorch side of bench/bench_gpu.c on the same GPU: a random
Hugging Face model of the same shape, decode tokens/s of `model.generate` (greedy, exactly NEW
new tokens per row, KV cache, bf16 weights) at ROWS rows, and forward+backward tokens/s and MFU
under torch.autocast(bfloat16) with fp32 master weights (what grpo's model.dtype = bf16 does),
counting model FLOPs the way bench_gpu.c does.

  python3 bench/bench_gpu_torch.py [--shape qwen2.5-0.5b|minimind2-small] [--rows 64]
      [--prompt 64] [--new 128] [--batch 8] [--seq 512] [--steps 5] [--peak-tflops 989]
"""
import argparse
import time

import torch
import transformers

SHAPES = {  # hidden, layers, heads, kv heads, head dim, intermediate, vocab, model_type, bias
    "qwen2.5-0.5b": (896, 24, 14, 2, 64, 4864, 151936, "qwen2"),
    "minimind2-small": (512, 8, 8, 2, 64, 1408, 6400, "llama"),
}


def make(shape):
    C, L, NH, NKV, HD, I, V, kind = SHAPES[shape]
    cls = transformers.Qwen2Config if kind == "qwen2" else transformers.LlamaConfig
    cfg = cls(hidden_size=C, num_hidden_layers=L, num_attention_heads=NH,
              num_key_value_heads=NKV, intermediate_size=I, vocab_size=V,
              tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1e6,
              max_position_embeddings=32768)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).cuda()


def flops_per_token(shape, T):
    C, L, NH, NKV, HD, I, V, _ = SHAPES[shape]
    mm = L * (C * NH * HD * 2 + C * NKV * HD * 2 + 3 * C * I) + C * V
    return 6 * mm + 6 * L * T * NH * HD


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--peak-tflops", type=float, default=989)
    a = p.parse_args()
    model = make(a.shape)
    V = SHAPES[a.shape][6]
    print(f"shape {a.shape}: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}")
    # fwd+bwd: autocast bf16, fp32 weights; loss = mean next-token log-prob, like bench_gpu.c
    ids = torch.randint(0, V, (a.batch, a.seq), device="cuda")
    best = 1e30
    for s in range(a.steps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids).logits[:, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).mean()
        logp.backward()
        torch.cuda.synchronize()
        if s > 0:
            best = min(best, time.perf_counter() - t0)
    fl = flops_per_token(a.shape, a.seq) * a.batch * a.seq
    print(f"fwd+bwd ({a.batch},{a.seq}): {best:.4f} s/step, {a.batch * a.seq / best:.0f} tokens/s,"
          f" {fl / best / 1e12:.1f} TFLOP/s, MFU {100 * fl / best / 1e12 / a.peak_tflops:.1f}% of "
          f"{a.peak_tflops:.0f} TFLOP/s (best of {a.steps})")
    del logits, logp
    model.zero_grad(set_to_none=True)
    # decode: bf16 weights, greedy, exactly `new` tokens per row
    model = model.to(torch.bfloat16).eval()
    prompt = torch.randint(0, V, (a.rows, a.prompt), device="cuda")
    kw = dict(max_new_tokens=a.new, min_new_tokens=a.new, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        model.generate(prompt, **dict(kw, max_new_tokens=2, min_new_tokens=2))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(prompt, **kw)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    print(f"decode {a.rows} rows, prompt {a.prompt}, {a.new} new: {dt:.2f} s, "
          f"{a.rows * a.new / dt:.0f} new tokens/s")


if __name__ == "__main__":
    main()
