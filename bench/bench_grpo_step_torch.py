#!/usr/bin/env python3
"""bench_grpo_step_torch.py — one full GRPO step in PyTorch eager, the reference for `grpo train`
run side by side by bench/bench_grpo_step.py (see bench/grpo_step.md).

Two modes:

  --make DIR   writes the benchmark model once: a random-init LlamaForCausalLM with the
               MiniMind2-small shape (hidden 512, 8 layers, 8 query / 2 KV heads, intermediate
               1408, vocab 6400, tied embeddings, RoPE theta 1e6) as a Hugging Face directory, with
               MiniMind2's tokenizer (../shared/data/minimind2 or --tokenizer DIR) whose two
               end tokens are renamed (<|im_end|> -> <|bench_no_eos|>, <|endoftext|> ->
               <|bench_pad|>) and no eos_token: neither side has an EOS id, so every one of the
               B*G rows generates exactly max_new_tokens tokens on both sides (same work).

  --model DIR  times GRPO steps the way MiniMind's train_grpo.py does them:
                 generate: model.generate(num_return_sequences=G, do_sample, KV cache)
                 rewards: MiniMind's rule rewards (reasoning-format regex 0.5, tag count 0.25 each)
                 reference: per-token log-probs of a frozen copy (log_softmax + gather), no_grad
                 policy: per-token log-probs (log_softmax + gather) with grad
                 loss: GRPO, per-sequence mean (loss_type = grpo), k3 KL * beta, advantages
                       (r - mean_g) / (std_g + 1e-4); backward; clip_grad_norm_(1.0); AdamW step
               and prints the wall and CPU time of each step, CPU seconds per phase, the median
               after --warmup steps, and the peak RSS of the process (getrusage ru_maxrss).
               --micro-batch M runs the reference/policy passes M rows at a time (as
               train.micro_batch), the loss still averaged over all B*G sequences.
               --gradient-checkpointing: the policy's model.gradient_checkpointing_enable()
               (recompute each layer in backward; train.gradient_checkpointing on the C side).
               --autocast: torch.autocast("cpu", dtype=torch.bfloat16) around generate, the
               reference pass and the policy's forward (master weights, backward's weight
               gradients and AdamW fp32), PyTorch's bf16 mixed precision on the CPU.
               --beta 0: no reference model; --loss-type dapo: token mean over the batch;
               --rewards arith --stop-at-eos with --data examples/arith/train.jsonl --B 8
               --G 16: the embedded default's step (examples/arith.ini) on the model of
               `grpo init-model` + `grpo sft`, which transformers loads as written.

Usage:
  python3 bench/bench_grpo_step_torch.py --make build/bench_grpo_step/model
  python3 bench/bench_grpo_step_torch.py --model build/bench_grpo_step/model \
      --data bench/bench_grpo_step_prompts.jsonl --steps 4 --warmup 1 --threads 1
"""
import argparse
import json
import os
import re
import resource
import statistics
import sys
import time

import torch

# the shared data beside the project (../shared), or $GRPO_SHARED_DIR
SHARED = os.environ.get("GRPO_SHARED_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared")

SHAPE = dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=1408, vocab_size=6400)
CLOCK = time.process_time  # phases are CPU seconds: the machine is shared, wall time is noisy
RENAMES = {"<|im_end|>": "<|bench_no_eos|>", "<|endoftext|>": "<|bench_pad|>"}


def make_model(out, tokenizer_dir, seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    os.makedirs(out, exist_ok=True)
    cfg = LlamaConfig(**SHAPE, head_dim=SHAPE["hidden_size"] // SHAPE["num_attention_heads"],
                      max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1e6,
                      hidden_act="silu", tie_word_embeddings=True, attention_bias=False,
                      mlp_bias=False, bos_token_id=1, eos_token_id=None, pad_token_id=0,
                      torch_dtype="float32")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)  # generate() takes everything from the call below
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    for t in tok["added_tokens"]:
        t["content"] = RENAMES.get(t["content"], t["content"])
    for old, new in RENAMES.items():
        if old in tok["model"]["vocab"]:
            tok["model"]["vocab"][new] = tok["model"]["vocab"].pop(old)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    tc = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|im_start|>",
          "pad_token": "<|bench_pad|>", "model_max_length": 32768, "add_bos_token": False,
          "add_eos_token": False, "clean_up_tokenization_spaces": False}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {out}: {n / 1e6:.2f}M parameters, vocab {SHAPE['vocab_size']}, no EOS token")


# ---- rewards: MiniMind's rule rewards (train_grpo.py calculate_rewards, reward model left out) --

FORMAT = [r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$",
          r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$"]
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]


ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def arith_rewards(completions, answers):
    """The embedded default's rewards (examples/arith.ini): builtin.accuracy (the last
    <answer>...</answer>, trimmed, equal to the row's answer: 1) + 0.5 x builtin.format (the
    reasoning-format regex, 0.5 when it matches)."""
    r = []
    for c, gold in zip(completions, answers):
        found = ANSWER.findall(c)
        v = 1.0 if found and found[-1].strip() == gold else 0.0
        v += 0.5 * (0.5 if any(re.match(p, c, re.S) for p in FORMAT) else 0.0)
        r.append(v)
    return torch.tensor(r, dtype=torch.float32)


def rewards_of(completions):
    r = []
    for c in completions:
        v = 0.5 if any(re.match(p, c, re.S) for p in FORMAT) else 0.0
        v += sum(0.25 for t in TAGS if c.count(t) == 1)
        r.append(v)
    return torch.tensor(r, dtype=torch.float32)


# ---- the step -------------------------------------------------------------------------------


def per_token_logps(model, ids, attn, n_keep):
    """(N, n_keep) log p of the last n_keep tokens of ids: log_softmax over the vocab + gather."""
    logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=n_keep + 1).logits
    logits = logits[:, :-1, :]  # (N, n_keep, V): position t predicts token t+1
    return torch.gather(logits.log_softmax(dim=-1), 2, ids[:, -n_keep:].unsqueeze(-1)).squeeze(-1)


def completion_mask(completion, eos):
    """(N, T) 1 for the tokens up to and including the first eos (all when eos is None)."""
    if eos is None:
        return torch.ones_like(completion, dtype=torch.float32)
    is_eos = completion == eos
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), completion.shape[1])  # (N)
    return (torch.arange(completion.shape[1])[None, :] <= first[:, None]).float()


def autocast(a):
    """bf16 autocast on the CPU with --autocast, else a context that does nothing."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast)


def grpo_step(a, policy, ref, tok, opt, prompt_ids, prompt_mask, answers):
    """One full step; returns a dict of a few numbers (so the work cannot be skipped).
    ref None (beta 0): no reference pass, no KL. answers: the gold answers of the B prompts
    (--rewards arith)."""
    B, G = prompt_ids.shape[0], a.G
    ph = {}  # CPU seconds per phase
    t0 = CLOCK()
    policy.eval()
    with torch.no_grad(), autocast(a):
        out = policy.generate(input_ids=prompt_ids, attention_mask=prompt_mask, do_sample=True,
                              temperature=a.temperature, top_k=0, top_p=1.0,
                              max_new_tokens=a.max_new_tokens,
                              num_return_sequences=G, pad_token_id=tok.pad_token_id,
                              eos_token_id=a.eos, use_cache=True)
    t1 = CLOCK()
    ph["generate"] = t1 - t0
    P = prompt_ids.shape[1]
    completion = out[:, P:]  # (N, T)
    T = completion.shape[1]
    mask = completion_mask(completion, a.eos)  # (N, T)
    attn = torch.cat([prompt_mask.repeat_interleave(G, 0), mask.long()], 1)
    texts = tok.batch_decode(completion, skip_special_tokens=True)
    if a.rewards == "arith":
        r = arith_rewards(texts, [x for x in answers for _ in range(G)])  # (N)
    else:
        r = rewards_of(texts)  # (N)
    grouped = r.view(B, G)
    mean = grouped.mean(1).repeat_interleave(G)
    std = grouped.std(1).repeat_interleave(G)
    adv = ((r - mean) / (std + 1e-4)).unsqueeze(1)  # (N, 1)
    t2 = CLOCK()
    ph["rewards"] = t2 - t1
    for k in ("reference", "policy_fwd", "policy_bwd"):
        ph[k] = 0.0
    N = B * G
    mb = a.micro_batch if 0 < a.micro_batch < N else N
    loss_sum, kl_sum = 0.0, 0.0
    policy.train()
    for r0 in range(0, N, mb):  # micro-batches of rows, as train.micro_batch
        rows = slice(r0, min(r0 + mb, N))
        ta = CLOCK()
        tb = ta
        if ref is not None:
            with torch.no_grad(), autocast(a):
                ref_logp = per_token_logps(ref, out[rows], attn[rows], T).float()  # (mb, T)
            tb = CLOCK()
        with autocast(a):
            logp = per_token_logps(policy, out[rows], attn[rows], T).float()  # (mb, T)
        per_token = -(torch.exp(logp - logp.detach()) * adv[rows])
        if ref is not None:
            d = ref_logp - logp
            kl = torch.exp(d) - d - 1
            per_token = per_token + a.beta * kl
        else:
            kl = torch.zeros_like(logp)
        m = mask[rows]
        if a.loss_type == "dapo":  # token mean over the whole batch
            loss = (per_token * m).sum() / mask.sum()
        else:  # grpo: per-sequence mean, then mean over all N sequences
            loss = ((per_token * m).sum(1) / m.sum(1)).sum() / N
        tc = CLOCK()
        loss.backward()
        td = CLOCK()
        ph["reference"] += tb - ta
        ph["policy_fwd"] += tc - tb
        ph["policy_bwd"] += td - tc
        loss_sum += loss.item()
        kl_sum += (kl * m).sum().item()
    t5 = CLOCK()
    gn = torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    ph["clip_adamw"] = CLOCK() - t5
    return {"phases": ph, "T": T, "tokens": int(mask.sum().item()), "loss": loss_sum,
            "kl": kl_sum / mask.sum().item(),
            "reward": r.mean().item(), "grad_norm": gn.item()}


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(a):
    from transformers import AutoTokenizer, LlamaForCausalLM

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rss_import = rss_mib()
    tok = AutoTokenizer.from_pretrained(a.model)
    policy = LlamaForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    ref = None  # beta 0: no reference model (as TRL and grpo)
    if a.beta != 0:
        ref = LlamaForCausalLM.from_pretrained(a.model, dtype=torch.float32)
        ref.eval().requires_grad_(False)
    a.eos = tok.eos_token_id if a.stop_at_eos else None
    if a.gradient_checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(policy.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    rss_loaded = rss_mib()
    with open(a.data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()][: a.B]
    prompts = [x["prompt"] for x in rows]
    answers = [str(x.get("answer", "")) for x in rows]
    enc = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    P = max(len(e) for e in enc)
    ids = torch.full((a.B, P), tok.pad_token_id, dtype=torch.long)
    pmask = torch.zeros((a.B, P), dtype=torch.long)
    for b, e in enumerate(enc):  # left padding, as the C sampler
        ids[b, P - len(e):] = torch.tensor(e)
        pmask[b, P - len(e):] = 1
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, B={a.B} G={a.G} "
          f"prompt lengths {[len(e) for e in enc]}, max_new_tokens {a.max_new_tokens}, "
          f"beta {a.beta}, micro_batch {a.micro_batch or a.B * a.G}"
          + (", bf16 autocast" if a.autocast else ""), flush=True)
    times, cpus = [], []
    for s in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        m = grpo_step(a, policy, ref, tok, opt, ids, pmask, answers)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        times.append(dt)
        cpus.append(dc)
        print(f"step {s + 1}: {dt:.3f} s (cpu {dc:.3f} s)  T={m['T']} tokens={m['tokens']} "
              f"loss={m['loss']:.4g} "
              f"kl={m['kl']:.3g} reward={m['reward']:.3g} grad_norm={m['grad_norm']:.3g}\n"
              "  phases (cpu s) "
              + " ".join(f"{k} {v:.3f}" for k, v in m["phases"].items()), flush=True)
    timed = times[a.warmup:] or times
    print(f"torch_step_median_s {statistics.median(timed):.3f} cpu "
          f"{statistics.median(cpus[a.warmup:] or cpus):.3f}  (steps {a.warmup + 1}..{a.steps})")
    print(f"torch_rss_mib after_import {rss_import:.0f} after_load {rss_loaded:.0f} "
          f"peak {rss_mib():.0f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--make", metavar="DIR", help="write the benchmark model directory and exit")
    p.add_argument("--tokenizer", default=os.path.join(SHARED, "data", "minimind2"),
                   help="directory with MiniMind2's tokenizer.json (for --make)")
    p.add_argument("--model", help="model directory written by --make")
    p.add_argument("--data", default="bench/bench_grpo_step_prompts.jsonl")
    p.add_argument("--B", type=int, default=2, help="prompts per step")
    p.add_argument("--G", type=int, default=8, help="generations per prompt")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.02)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--micro-batch", type=int, default=0,
                   help="rows per reference/policy forward+backward; 0 = all B*G at once")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--autocast", action="store_true",
                   help="bf16 autocast (CPU) around generate and the forwards")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute the policy's layers in backward (TRL's GRPO default)")
    p.add_argument("--loss-type", choices=("grpo", "dapo"), default="grpo",
                   help="grpo: per-sequence mean; dapo: token mean over the batch")
    p.add_argument("--rewards", choices=("minimind", "arith"), default="minimind",
                   help="minimind: format + tags; arith: accuracy against the row's answer + "
                        "0.5 x format (the embedded default, examples/arith.ini)")
    p.add_argument("--stop-at-eos", action="store_true",
                   help="rows end at the tokenizer's EOS (default: every row runs to the limit)")
    a = p.parse_args()
    if a.make:
        if not os.path.exists(os.path.join(a.tokenizer, "tokenizer.json")):
            sys.exit(f"SKIP: {a.tokenizer}/tokenizer.json not found (MiniMind2's tokenizer)")
        make_model(a.make, a.tokenizer, a.seed)
    elif a.model:
        run(a)
    else:
        p.error("give --make DIR or --model DIR")


if __name__ == "__main__":
    main()
