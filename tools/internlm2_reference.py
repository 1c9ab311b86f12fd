"""internlm2_reference.py — a PyTorch reference of the InternLM2 math (the reward model
InternLM2ForRewardModel), written from the architecture's description, for
tools/make_reward_model_fixtures.py. Not a copy of InternLM's remote code.

  x = tok_embeddings[ids]
  per layer:  a = rmsnorm(x) * attention_norm
              qkv = a @ wqkv.T (+ bias), rows interleaved by kv group: for kv head h the g = NH/NKV
                    query heads of its group, then its key head, then its value head (HD each)
              q, k = rope(q), rope(k)      (rotate_half, theta = rope_theta, positions 0..T-1)
              x = x + wo(causal GQA softmax(q k^T / sqrt(HD)) v)
              b = rmsnorm(x) * ffn_norm
              x = x + w2(silu(w1 b) * w3 b)
  h = rmsnorm(x) * norm;  reward = v_head(h)[at the reward token appended last]

pack_wqkv() builds the packed tensor from separate q/k/v projections (the inverse of what the C
plugin's relayout does on load).
"""
import torch


def pack_wqkv(wq, wk, wv, nh, nkv, hd):
    """q (NH*HD, ...), k/v (NKV*HD, ...) -> packed ((NH+2NKV)*HD, ...), interleaved by kv group."""
    g = nh // nkv
    rows = []
    for h in range(nkv):
        for j in range(g):
            rows.append(wq[(h * g + j) * hd:(h * g + j + 1) * hd])
        rows.append(wk[h * hd:(h + 1) * hd])
        rows.append(wv[h * hd:(h + 1) * hd])
    return torch.cat(rows, 0)


def unpack_qkv(qkv, nh, nkv, hd):
    """(..., (NH+2NKV)*HD) activations -> q (..., NH, HD), k, v (..., NKV, HD)."""
    g = nh // nkv
    x = qkv.reshape(*qkv.shape[:-1], nkv, g + 2, hd)
    q = x[..., :g, :].reshape(*qkv.shape[:-1], nh, hd)
    return q, x[..., g, :], x[..., g + 1, :]


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    """x (T, H, HD) at positions 0..T-1, split halves."""
    T, _, hd = x.shape
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=x.dtype) / hd)
    ang = torch.arange(T, dtype=x.dtype)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def hidden(sd, cfg, ids):
    """Final hidden states (T, C) of one unpadded row ids (T,), from the state dict sd."""
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    C = cfg["hidden_size"]
    hd, eps, theta = C // nh, cfg["rms_norm_eps"], cfg["rope_theta"]
    g = nh // nkv
    x = sd["model.tok_embeddings.weight"][ids]
    T = x.shape[0]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["num_hidden_layers"]):
        p = lambda n: sd.get(f"model.layers.{l}.{n}")
        a = rmsnorm(x, p("attention_norm.weight"), eps)
        qkv = a @ p("attention.wqkv.weight").T
        if p("attention.wqkv.bias") is not None:
            qkv = qkv + p("attention.wqkv.bias")
        q, k, v = unpack_qkv(qkv, nh, nkv, hd)
        q, k = rope(q, theta), rope(k, theta)
        k = k.repeat_interleave(g, dim=1)  # query head i uses kv head i // g
        v = v.repeat_interleave(g, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) / hd ** 0.5
        s = s.masked_fill(~causal, float("-inf")).softmax(-1)
        o = torch.einsum("hts,shd->thd", s, v).reshape(T, nh * hd)
        o = o @ p("attention.wo.weight").T
        if p("attention.wo.bias") is not None:
            o = o + p("attention.wo.bias")
        x = x + o
        b = rmsnorm(x, p("ffn_norm.weight"), eps)
        f = torch.nn.functional.silu(b @ p("feed_forward.w1.weight").T) * (
            b @ p("feed_forward.w3.weight").T)
        x = x + f @ p("feed_forward.w2.weight").T
    return rmsnorm(x, sd["model.norm.weight"], eps)


def reward(sd, cfg, ids):
    """InternLM2ForRewardModel's score of ids (which already end with the reward token)."""
    h = hidden(sd, cfg, torch.tensor(ids))
    return (h @ sd["v_head.weight"].T)[-1, 0].item()
