#!/usr/bin/env python3
"""bench_grpo_step_trl.py — the same GRPO steps as bench/bench_grpo_step.ini, in Hugging Face
TRL's GRPOTrainer (pip install trl; only this benchmark needs it, never the tests).

Settings matched to the C side (bench/bench_grpo_step.ini) and to bench_grpo_step_torch.py:
the benchmark model (MiniMind2-small shape, random init, no EOS id, so every row generates
max_completion_length tokens), B = 2 prompts x G = 8 completions per step (TRL counts
completions: per_device_train_batch_size = 16, one generation batch per optimizer step),
temperature 1, beta 0.02 (TRL then holds a reference copy), loss_type grpo, lr 1e-6,
max_grad_norm 1.0, AdamW, fp32 on the CPU, one thread, no gradient checkpointing unless
--gradient-checkpointing (TRL's own default is on). Rewards: MiniMind's reasoning-format regex
(0.5) and tag counts (0.25 each), as both other sides. The prompts are plain text (ChatML written
out), so no chat template is applied.

Prints the CPU seconds of each optimizer step (time.process_time() between TrainerCallback's
on_step_begin and on_step_end: generation, reference, loss, backward and AdamW), the median after
--warmup steps, and the peak RSS of the process (getrusage ru_maxrss) as bench_grpo_step.py
parses them: "step K cpu S", "median cpu S", "peak_rss_mib M".

Usage:
  python3 bench/bench_grpo_step_trl.py --model build/bench_grpo_step/model \\
      --data bench/bench_grpo_step_prompts.jsonl --steps 4 --warmup 1 --threads 1
"""
import argparse
import json
import re
import resource
import statistics
import tempfile
import time

import torch

THINK = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.S)
THINK2 = re.compile(r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$", re.S)


def format_reward(completions, **kw):
    return [0.5 if THINK.match(c) or THINK2.match(c) else 0.0 for c in completions]


def tags_reward(completions, **kw):
    out = []
    for c in completions:
        s = 0.0
        for tag in ("<think>", "</think>", "<answer>", "</answer>"):
            s += 0.25 if c.count(tag) == 1 else 0.0
        out.append(s)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--gradient-checkpointing", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    with open(a.data, encoding="utf-8") as f:
        prompts = [json.loads(line)["prompt"] for line in f if line.strip()]
    B, G = 2, 8
    ds = Dataset.from_list([{"prompt": p} for p in prompts])
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench_trl_"), use_cpu=True, max_steps=a.steps,
        per_device_train_batch_size=B * G, gradient_accumulation_steps=1, num_generations=G,
        max_completion_length=a.new_tokens, temperature=1.0, beta=0.02, loss_type="grpo",
        learning_rate=1e-6, max_grad_norm=1.0, logging_steps=1, report_to="none",
        save_strategy="no", gradient_checkpointing=a.gradient_checkpointing, bf16=False,
        seed=42, dataloader_num_workers=0, shuffle_dataset=False,
        # the tokenizer has no EOS: -1 matches no token, so every row runs to the limit
        generation_kwargs={"eos_token_id": -1})
    times = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.process_time()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.process_time() - self.t0)
            print(f"step {len(times)} cpu {times[-1]:.3f}", flush=True)

    trainer = GRPOTrainer(model=model, reward_funcs=[format_reward, tags_reward], args=cfg,
                          train_dataset=ds, processing_class=tok, callbacks=[Clock()])
    trainer.eos_token_ids = [-1]  # its completion mask's end ids: none (see generation_kwargs)
    trainer.train()
    rest = times[a.warmup:] or times
    print(f"median cpu {statistics.median(rest):.3f}")
    print(f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
