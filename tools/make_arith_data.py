#!/usr/bin/env python3
"""The embedded default task: two-digit addition worked digit by digit, with exact answers.

Writes examples/arith/{sft,train,eval}.jsonl from a fixed seed (all three disjoint):
  sft.jsonl    {"prompt": "37+25=", "response": "<think>\\n7+5=12\\n3+2+1=6\\n</think>\\n<answer>\\n62\\n</answer>"}
  train.jsonl  {"prompt": "37+25=", "answer": "62"}          (GRPO prompts)
  eval.jsonl   {"prompt": "37+25=", "answer": "62"}          (held out)

The <think> adds the units digits, then the tens digits plus the carry (0 or 1), so every step is
a one-digit fact the model sees thousands of times. The SFT teacher is deliberately sloppy: its
<think> is always right, but with probability --slip its <answer> writes the result with the
digits reversed (62 -> 26). SFT so teaches the format, the digit-wise sums and a bad transcription
habit; GRPO, rewarded for the exact answer, can unlearn the habit, and that carries over to
held-out prompts.
Usage: python3 tools/make_arith_data.py [--slip P] [--eval N] [--sft N] [--out DIR]
"""
import argparse
import json
import os
import random


def think(a, b):
    units = a % 10 + b % 10
    carry = units // 10
    tens = a // 10 + b // 10 + carry
    return f"{a % 10}+{b % 10}={units}\n{a // 10}+{b // 10}+{carry}={tens}"


def response(a, b, slip):
    ans = str(a + b)
    shown = ans[::-1] if slip else ans
    return f"<think>\n{think(a, b)}\n</think>\n<answer>\n{shown}\n</answer>"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slip", type=float, default=0.7)
    ap.add_argument("--eval", type=int, default=300)
    ap.add_argument("--sft", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "examples", "arith"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)
    eval_pairs = pairs[:args.eval]
    sft_pairs = pairs[args.eval:args.eval + args.sft]
    train_pairs = pairs[args.eval + args.sft:]
    os.makedirs(args.out, exist_ok=True)

    def write(name, items):
        with open(os.path.join(args.out, name), "w") as f:
            for item in items:
                f.write(json.dumps(item) + "\n")

    write("sft.jsonl", [{"prompt": f"{a}+{b}=", "response": response(a, b, rng.random() < args.slip)}
                        for a, b in sft_pairs])
    write("train.jsonl", [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in train_pairs])
    write("eval.jsonl", [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in eval_pairs])
    print(f"wrote {len(sft_pairs)} sft, {len(train_pairs)} train, {len(eval_pairs)} eval rows "
          f"to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
