"""bench_torch_util.py — the harness shared by bench_dense_torch.py and bench_moe_torch.py (the
PyTorch sides of bench_dense.c / bench_moe.c, whose C harness is bench_util.h): the command line,
the fwd+bwd loop (what TRL's GRPO loss does: logits -> log_softmax -> gather next-token log-probs
-> mean -> backward) and the greedy decode through model.generate.
"""
import argparse
import time

import torch


def parse_args():
    """--threads --batch --seq --rows --prompt --new --steps; sets torch's threads and seed 0."""
    ap = argparse.ArgumentParser()
    for k, d in [("threads", 1), ("batch", 4), ("seq", 256), ("rows", 16), ("prompt", 32),
                 ("new", 128), ("steps", 3)]:
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return a


def fwd_bwd(lm, ids, steps, extra_loss=None):
    """Best seconds of `steps` forward + backward steps of ids (B,T) after one warm-up; the loss
    is the mean next-token log-prob plus extra_loss() (called after each forward) when given."""
    best = 1e30
    for s in range(steps + 1):
        t0 = time.perf_counter()
        lm.zero_grad()
        logits = lm(input_ids=ids).logits[:, :-1]
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = logp.mean()
        if extra_loss is not None:
            loss = loss + extra_loss()
        loss.backward()
        dt = time.perf_counter() - t0
        if s > 0:
            best = min(best, dt)
    return best


def print_fwd_bwd(a, best, flops):
    """The fwd+bwd line: seconds per step, tokens/s, FLOP/s for flops per step."""
    N = a.batch * a.seq
    print(f"fwd+bwd ({a.batch},{a.seq}): {best:.3f} s/step, {N / best:.0f} tokens/s, "
          f"{flops / best / 1e9:.1f} GFLOP/s (best of {a.steps})")


def decode(lm, a, V):
    """model.generate of a.rows random prompts of a.prompt tokens, greedy, exactly a.new new
    tokens (KV cache); prints new tokens/s over the whole call."""
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
