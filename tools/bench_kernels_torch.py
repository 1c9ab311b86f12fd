#!/usr/bin/env python3
"""PyTorch (CPU) side of bench/bench_kernels.c: the same ops on the same MiniMind2-small shapes,
fwd and fwd+bwd through autograd, so the C backend can be reported as a ratio to PyTorch on the
same machine.

    python3 tools/bench_kernels_torch.py [B T threads]      (defaults 4 256 1)
    BENCH_CLOCK=cpu: time the calling thread's CPU time (as bench_kernels does; with threads 1)

Times are the best of several runs (after a warm-up), in ms. "bwd" is the backward alone:
(fwd+bwd) - fwd. Attention is torch's scaled_dot_product_attention (causal, GQA by repeat_kv);
the head is what PyTorch code does without a fused kernel: full logits, log_softmax, gather.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

C, I, V, NH, NKV, HD, L = 512, 1408, 6400, 8, 2, 64, 8


CLOCK = time.thread_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter


def best(fn, min_time=0.3):
    fn()
    best_t, start, runs = 1e30, time.perf_counter(), 0
    while runs < 3 or time.perf_counter() - start < min_time:
        t0 = CLOCK()
        fn()
        best_t = min(best_t, CLOCK() - t0)
        runs += 1
    return best_t


def fwd_bwd(make, run):
    """times of run() forward and of forward + backward, on fresh leaf tensors from make()"""
    args = make()
    t_f = best(lambda: run(*args))

    def both():
        out = run(*args)
        out.backward(torch.ones_like(out))
    t_fb = best(both)
    return t_f, t_fb - t_f


def main():
    B = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    T = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    torch.set_num_threads(threads)
    N = B * T
    print("PyTorch %s, threads %d, B %d T %d N %d" % (torch.__version__, threads, B, T, N))
    rg = dict(requires_grad=True)
    rows = []  # name, fwd s, bwd s, count per model fwd+bwd

    for name, ic, oc, count in [("q, o", C, C, 2 * L), ("k, v", C, NKV * HD, 2 * L),
                                ("gate, up", C, I, 2 * L), ("down", I, C, L)]:
        f, b = fwd_bwd(lambda: (torch.randn(N, ic, **rg), torch.randn(oc, ic, **rg)),
                       lambda x, w: F.linear(x, w))
        rows.append(("matmul " + name, f, b, count))

    def attn(q, k, v):
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    f, b = fwd_bwd(lambda: (torch.randn(B, NH, T, HD, **rg), torch.randn(B, NKV, T, HD, **rg),
                            torch.randn(B, NKV, T, HD, **rg)), attn)
    rows.append(("attention", f, b, L))

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    f, b = fwd_bwd(lambda: (torch.randn(N, C, **rg), torch.randn(C, **rg)), rms)
    rows.append(("rmsnorm", f, b, 2 * L + 1))
    f, b = fwd_bwd(lambda: (torch.randn(N, I, **rg), torch.randn(N, I, **rg)),
                   lambda g, u: F.silu(g) * u)
    rows.append(("swiglu", f, b, L))
    targets = torch.randint(0, V, (N,))

    def head(h, w):
        return torch.log_softmax(F.linear(h, w), dim=-1).gather(1, targets[:, None])
    f, b = fwd_bwd(lambda: (torch.randn(N, C, **rg), (0.05 * torch.randn(V, C)).requires_grad_()),
                   head)
    rows.append(("head", f, b, 1))

    total = 0.0
    for name, f, b, count in rows:
        print("  %-16s x%-3d fwd %8.3f ms  bwd %8.3f ms" % (name, count, f * 1e3, b * 1e3))
        total += (f + b) * count
    print("model fwd+bwd (%d layers + head, no rope/embedding/residual): %.1f ms" %
          (L, total * 1e3))


if __name__ == "__main__":
    main()
