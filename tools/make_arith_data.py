#!/usr/bin/env python3
"""The embedded default task: small arithmetic prompts with exact answers.

Writes examples/arith/{sft,train,eval}.jsonl from a fixed seed:
  sft.jsonl    {"prompt": "...", "response": "<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>"}
  train.jsonl  {"prompt": "...", "answer": "..."}            (GRPO prompts)
  eval.jsonl   {"prompt": "...", "answer": "..."}            (held out: no overlap with train/sft)
Usage: python3 tools/make_arith_data.py
"""
import json
import os
import random


def problem(rng):
    a, b = rng.randint(0, 49), rng.randint(0, 49)
    op = rng.choice("+-")
    return f"{a}{op}{b}", str(a + b if op == "+" else a - b)


def response(expr, ans):
    return f"<think>\n{expr}={ans}\n</think>\n<answer>\n{ans}\n</answer>"


def main():
    rng = random.Random(20261202)
    seen, rows = set(), []
    while len(rows) < 3000:
        expr, ans = problem(rng)
        if expr not in seen:
            seen.add(expr)
            rows.append((expr, ans))
    eval_rows, train_rows, sft_rows = rows[:200], rows[200:1600], rows[1600:]
    out = os.path.join(os.path.dirname(__file__), "..", "examples", "arith")
    os.makedirs(out, exist_ok=True)

    def write(name, items, fn):
        with open(os.path.join(out, name), "w") as f:
            for expr, ans in items:
                f.write(json.dumps(fn(expr, ans)) + "\n")

    write("sft.jsonl", sft_rows, lambda e, a: {"prompt": f"{e}=", "response": response(e, a)})
    write("train.jsonl", train_rows, lambda e, a: {"prompt": f"{e}=", "answer": a})
    write("eval.jsonl", eval_rows, lambda e, a: {"prompt": f"{e}=", "answer": a})
    print(f"wrote {len(sft_rows)} sft, {len(train_rows)} train, {len(eval_rows)} eval rows to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
