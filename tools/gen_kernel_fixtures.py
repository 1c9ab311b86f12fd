#!/usr/bin/env python3
"""Writes tests/fixtures/kernels/*.json: small cases of the CPU backend's ops computed by the real
references — PyTorch (torch.optim.AdamW, F.linear, F.silu, log_softmax, autograd for every
gradient) and Hugging Face transformers' Llama code (LlamaRMSNorm, LlamaRotaryEmbedding +
apply_rotary_pos_emb, repeat_kv) — so that tests/test_kernels.c can check the backend against
them without Python at test time.

Run from the repository root:  python3 tools/gen_kernel_fixtures.py
Each file is {"dims": {...}, "<tensor>": [numbers...], ...}, tensors flattened row-major in the
layouts of sdk/include/grpo/ops.h; float32 values are written with 9 significant digits (exact).
"""
import json
import math
import os

import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (LlamaRMSNorm, LlamaRotaryEmbedding,
                                                      apply_rotary_pos_emb, repeat_kv)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "kernels")
torch.manual_seed(1234)


def flat(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype in (torch.int32, torch.int64):
        return [int(x) for x in t.tolist()]
    return [float("%.9g" % x) for x in t.float().tolist()]


def write(name, dims, **tensors):
    doc = {"generator": "tools/gen_kernel_fixtures.py (torch %s)" % torch.__version__,
           "dims": dims}
    doc.update({k: flat(v) for k, v in tensors.items()})
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def rmsnorm():
    N, C, eps = 6, 40, 1e-6
    x = torch.randn(N, C, requires_grad=True)
    norm = LlamaRMSNorm(C, eps=eps)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(C))
    y = norm(x)
    dout = torch.randn(N, C)
    y.backward(dout)
    write("rmsnorm", {"N": N, "C": C, "eps": eps}, inp=x, w=norm.weight, out=y, dout=dout,
          dinp=x.grad, dw=norm.weight.grad)


def rope():
    B, T, NH, HD, theta = 2, 7, 3, 16, 10000.0
    cfg = LlamaConfig(hidden_size=NH * HD, num_attention_heads=NH, num_key_value_heads=NH,
                      head_dim=HD, rope_theta=theta, max_position_embeddings=4096)
    rot = LlamaRotaryEmbedding(cfg)
    # row 0 continues at position 1000, row 1 is left-padded by 2 (positions 0,0,0,1,2,...)
    pos = torch.tensor([[1000 + t for t in range(T)], [0, 0] + list(range(T - 2))])
    x = torch.randn(B, T, NH, HD, requires_grad=True)  # ops.h layout (N,NH,HD)
    xt = x.transpose(1, 2)  # HF layout (B,NH,T,HD)
    cos, sin = rot(xt, pos)
    y, _ = apply_rotary_pos_emb(xt, xt, cos, sin)
    y = y.transpose(1, 2)
    dout = torch.randn(B, T, NH, HD)
    y.backward(dout)
    write("rope", {"N": B * T, "NH": NH, "HD": HD, "theta": theta}, pos=pos.int(), inp=x,
          out=y, dout=dout, dinp=x.grad)


def attention():
    B, T, NH, NKV, HD = 2, 9, 4, 2, 8
    mask = torch.ones(B, T, dtype=torch.int32)
    mask[1, :3] = 0  # left padding
    q = torch.randn(B, T, NH, HD, requires_grad=True)
    k = torch.randn(B, T, NKV, HD, requires_grad=True)
    v = torch.randn(B, T, NKV, HD, requires_grad=True)
    # Hugging Face eager attention: repeat_kv, scaled scores, additive causal + padding mask
    qh, kh, vh = q.transpose(1, 2), repeat_kv(k.transpose(1, 2), NH // NKV), \
        repeat_kv(v.transpose(1, 2), NH // NKV)
    scores = qh @ kh.transpose(2, 3) / math.sqrt(HD)
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None] & \
        mask.bool()[:, None, None, :]
    real_q = mask.bool()[:, None, :, None]
    # padding queries (no key allowed in HF for left padding) are defined as 0 here
    allowed = allowed | ~real_q
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1) * real_q[..., 0]
    out = (torch.softmax(scores, dim=-1) @ vh) * real_q
    out = out.transpose(1, 2)
    dout = torch.randn(B, T, NH, HD) * mask[:, :, None, None]
    out.backward(dout)
    write("attention", {"B": B, "T": T, "NH": NH, "NKV": NKV, "HD": HD}, mask=mask, q=q, k=k,
          v=v, out=out, lse=lse, dout=dout, dq=q.grad, dk=k.grad, dv=v.grad)


def head():
    N, C, V, scale = 5, 8, 700, 1.0 / 0.8
    hidden = torch.randn(N, C, requires_grad=True)
    w = torch.randn(V, C, requires_grad=True)
    targets = torch.tensor([3, 699, -1, 512, 0], dtype=torch.int32)
    logits = scale * (hidden @ w.t())
    logsm = torch.log_softmax(logits, dim=-1)
    logp = logsm.gather(1, targets.clamp(min=0).long()[:, None])[:, 0] * (targets >= 0)
    entropy = -(logsm.exp() * logsm).sum(-1)
    lse = torch.logsumexp(logits, dim=-1)
    dlogp = torch.randn(N)
    logp.backward(dlogp)
    write("head", {"N": N, "C": C, "V": V, "scale": scale}, hidden=hidden, w=w,
          targets=targets, logp=logp, lse=lse, entropy=entropy, dlogp=dlogp,
          dhidden=hidden.grad, dw=w.grad)


def matmul_swiglu():
    N, IC, OC = 4, 24, 20
    x = torch.randn(N, IC, requires_grad=True)
    w = torch.randn(OC, IC, requires_grad=True)
    b = torch.randn(OC, requires_grad=True)
    y = F.linear(x, w, b)
    dout = torch.randn(N, OC)
    y.backward(dout)
    write("matmul", {"N": N, "IC": IC, "OC": OC}, inp=x, w=w, bias=b, out=y, dout=dout,
          dinp=x.grad, dw=w.grad, dbias=b.grad)
    I = 50
    g = (3 * torch.randn(N, I)).requires_grad_()
    u = torch.randn(N, I, requires_grad=True)
    y = F.silu(g) * u
    dout = torch.randn(N, I)
    y.backward(dout)
    write("swiglu", {"N": N, "I": I}, gate=g, up=u, out=y, dout=dout, dgate=g.grad, dup=u.grad)


def adamw():
    n, steps = 7, 3
    lr, betas, eps, wd = 1e-2, (0.9, 0.95), 1e-8, 0.1
    p = torch.nn.Parameter(torch.randn(n))
    p0 = p.detach().clone()
    opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    grads = torch.randn(steps, n)
    grads[:, 0] = 0.0  # pure decay
    for s in range(steps):
        p.grad = grads[s].clone()
        opt.step()
    st = opt.state[p]
    write("adamw", {"n": n, "steps": steps, "lr": lr, "beta1": betas[0], "beta2": betas[1],
                    "eps": eps, "weight_decay": wd},
          param0=p0, grads=grads, param=p, m=st["exp_avg"], v=st["exp_avg_sq"])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    rmsnorm()
    rope()
    attention()
    head()
    matmul_swiglu()
    adamw()
    print("wrote", sorted(os.listdir(OUT)))
