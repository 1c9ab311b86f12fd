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

--arith runs the embedded default's settings instead (examples/arith.ini; the model of
`grpo init-model` + `grpo sft`, which transformers loads as it is): B = 8 prompts of --data
(prompt + answer) x G = 16, 40 new tokens ending at the tokenizer's EOS, loss_type dapo, beta 0
(no reference model), lr 1e-4; rewards accuracy (the last <answer>, trimmed, equal to the row's
answer) + 0.5 x format.

--end-at L_0,...,L_{G-1} (the long-tail case, bench/bench_grpo_step_tail.py; the model's
tokenizer must have an EOS): row i of each generation batch ends with the tokenizer's EOS at
length L_{i % G} (TRL's RepeatSampler puts a prompt's G completions next to each other), as
grpo's GRPO_BENCH_END_AT does: a LogitsProcessor given to model.generate leaves only the EOS at
that token (a point mass) and bans the EOS before it; every generate call's lengths are checked
against the schedule ("  forced lengths ok: N rows", or the script stops). --grad-accum K:
gradient_accumulation_steps = K (TRL's default steps_per_generation = K: the K micro-batches of
B x G completions are generated in one generate call of K x B x G rows).

Prints the CPU and wall seconds of each optimizer step (time.process_time() / perf_counter()
between TrainerCallback's on_step_begin and on_step_end: generation, reference, loss, backward
and AdamW), its CPU seconds per phase (the trainer's methods wrapped: rollout =
_generate_and_score_completions less the reference's _get_per_token_logps_and_entropies,
policy_fwd = compute_loss, policy_bwd = accelerator.backward, optimizer = _clip_grad_norm +
optimizer.step), the completion tokens of the step, the median after --warmup steps, and the
peak RSS of the process (getrusage ru_maxrss) as bench_grpo_step.py parses them:
"step K cpu S wall W tokens N", "  phases (cpu s) ...", "median cpu S", "peak_rss_mib M".

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

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
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


def accuracy_reward(completions, answer, **kw):
    out = []
    for c, gold in zip(completions, answer):
        found = ANSWER.findall(c)
        out.append(1.0 if found and found[-1].strip() == str(gold) else 0.0)
    return out


class ForcedEnd:
    """A LogitsProcessor: row r (of the generate batch) ends with eos at length ends[r % G]; the
    eos is banned before it. P: the prompt columns (tokens generated = input_ids width - P)."""

    def __init__(self, P, ends, eos):
        self.P, self.ends, self.eos = P, torch.tensor(ends), eos

    def __call__(self, input_ids, scores):
        k = input_ids.shape[1] - self.P  # tokens generated so far: the next is token k + 1
        rows = torch.arange(scores.shape[0])
        last = k + 1 >= self.ends[rows % len(self.ends)]  # (N) the next token is the row's last
        scores = scores.clone()
        scores[:, self.eos] = float("-inf")
        scores[last] = float("-inf")
        scores[last, self.eos] = 0.0
        return scores


def force_lengths(model, ends, eos):
    """Wraps model.generate (what TRL calls) with ForcedEnd and checks each row's length (first
    eos + 1) against the schedule; prints how many rows matched."""
    from transformers import LogitsProcessorList
    inner = model.generate

    def generate(*args, **kw):
        P = kw["input_ids"].shape[1]
        kw["logits_processor"] = LogitsProcessorList([ForcedEnd(P, ends, eos)])
        out = inner(*args, **kw)
        comp = out[:, P:]
        for r in range(comp.shape[0]):
            hit = (comp[r] == eos).nonzero()
            got = int(hit[0]) + 1 if len(hit) else comp.shape[1]
            if got != ends[r % len(ends)]:
                raise SystemExit(f"forced lengths: row {r} has {got} tokens, expected "
                                 f"{ends[r % len(ends)]}")
        print(f"  forced lengths ok: {comp.shape[0]} rows", flush=True)
        return out
    model.generate = generate


def timed_phases(trainer, ph):
    """Wraps the trainer's methods so that each adds its CPU seconds to ph (see the docstring)."""
    def wrap(obj, name, key, pick=None):
        inner = getattr(obj, name)

        def timed(*args, **kw):
            t0 = time.process_time()
            try:
                return inner(*args, **kw)
            finally:
                k = pick(args) if pick else key
                if k:
                    ph[k] = ph.get(k, 0.0) + time.process_time() - t0
        setattr(obj, name, timed)

    wrap(trainer, "_generate_and_score_completions", "rollout")
    wrap(trainer, "_get_per_token_logps_and_entropies", None,
         lambda args: "reference" if trainer.ref_model is not None and args[0] is
         trainer.ref_model else None)
    wrap(trainer, "compute_loss", "policy_fwd")
    wrap(trainer.accelerator, "backward", "policy_bwd")
    wrap(trainer, "_clip_grad_norm", "optimizer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--B", type=int, default=2, help="prompts per step (not with --arith)")
    ap.add_argument("--G", type=int, default=8, help="completions per prompt (not with --arith)")
    ap.add_argument("--lora", type=int, default=0, metavar="R",
                    help="train LoRA adapters of rank R (alpha 2R) on all linear layers through "
                         "peft (pip install peft); TRL's reference is then the base with the "
                         "adapters off, as grpo's")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="gradient_accumulation_steps (micro-batches of B x G per step)")
    ap.add_argument("--end-at", default="",
                    help="L_0,...,L_{G-1}: row i of a group ends with the tokenizer's EOS at "
                         "length L_{i %% G} (the long-tail case)")
    ap.add_argument("--arith", action="store_true",
                    help="the embedded default's settings (examples/arith.ini), see above")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    with open(a.data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if a.arith:
        B, G, beta, loss, lr = 8, 16, 0.0, "dapo", 1e-4
        ds = Dataset.from_list([{"prompt": r["prompt"], "answer": str(r["answer"])}
                                for r in rows[: B * max(a.steps, 1)]])
        rewards, weights, gen = [accuracy_reward, format_reward], [1.0, 0.5], {}
    else:
        B, G, beta, loss, lr = a.B, a.G, 0.02, "grpo", 1e-6
        ds = Dataset.from_list([{"prompt": r["prompt"]} for r in rows])
        # the tokenizer has no EOS: -1 matches no token, so every row runs to the limit
        rewards, weights, gen = [format_reward, tags_reward], [1.0, 1.0], {"eos_token_id": -1}
    tok = AutoTokenizer.from_pretrained(a.model)
    ends = [int(x) for x in a.end_at.split(",")] if a.end_at else []
    if ends:  # the long tail: the tokenizer's EOS (TRL's own eos_token_ids) ends the rows
        assert len(ends) == G and tok.eos_token_id is not None, "--end-at: G lengths, an EOS"
        gen = {}
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench_trl_"), use_cpu=True, max_steps=a.steps,
        per_device_train_batch_size=B * G, gradient_accumulation_steps=a.grad_accum,
        num_generations=G,
        max_completion_length=a.new_tokens, temperature=1.0, beta=beta, loss_type=loss,
        learning_rate=lr, max_grad_norm=1.0, logging_steps=1, report_to="none",
        save_strategy="no", gradient_checkpointing=a.gradient_checkpointing, bf16=False,
        seed=42, dataloader_num_workers=0, shuffle_dataset=False, reward_weights=weights,
        disable_tqdm=True,
        generation_kwargs=gen)
    times, ph = [], {}

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0, self.w0 = time.process_time(), time.perf_counter()
            ph.clear()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            self.o0 = time.process_time()

        def on_optimizer_step(self, args, state, control, **kw):
            ph["optimizer"] = ph.get("optimizer", 0.0) + time.process_time() - self.o0

        def on_step_end(self, args, state, control, **kw):
            times.append(time.process_time() - self.t0)
            wall = time.perf_counter() - self.w0
            print(f"step {len(times)} cpu {times[-1]:.3f} wall {wall:.3f}", flush=True)
            ph["rollout"] = ph.get("rollout", 0.0) - ph.get("reference", 0.0)
            print("  phases (cpu s) " + " ".join(f"{k} {ph.get(k, 0.0):.3f}" for k in
                  ("rollout", "reference", "policy_fwd", "policy_bwd", "optimizer")), flush=True)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                print(f"  tokens {logs['completions/mean_length'] * B * G * a.grad_accum:.0f} "
                      f"longest {logs['completions/max_length']:.0f} shortest "
                      f"{logs['completions/min_length']:.0f} mean "
                      f"{logs['completions/mean_length']:.4f} clipped "
                      f"{logs.get('completions/clipped_ratio', 0):.4f}", flush=True)

    peft_config = None
    if a.lora:
        from peft import LoraConfig
        peft_config = LoraConfig(r=a.lora, lora_alpha=2 * a.lora, lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=rewards, args=cfg, train_dataset=ds,
                          processing_class=tok, callbacks=[Clock()], peft_config=peft_config)
    if ends:
        force_lengths(trainer.model, ends, tok.eos_token_id)
    elif not a.arith:
        trainer.eos_token_ids = [-1]  # its completion mask's end ids: none (see generation_kwargs)
    timed_phases(trainer, ph)
    trainer.train()
    rest = times[a.warmup:] or times
    print(f"median cpu {statistics.median(rest):.3f}")
    print(f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
