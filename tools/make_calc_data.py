#!/usr/bin/env python3
"""Writes examples/calc/: the tool-use task of the calculator environment (calc.calculator).

Prompts are two-digit multiplications "37*25=" (answers 100..9801) that the tiny arithmetic model
cannot work out itself: calling the calculator is the only practical way to the reward.
  train.jsonl  GRPO prompts with their "answer"
  eval.jsonl   300 held-out prompts with their "answer" (disjoint from the others)
  sft.jsonl    the warm start: half the prompts answered by a call ("calc: 37*25"), half by a
               guess ("<answer>RANDOM</answer>"), and the turn after a call's observation
               ("...<|im_end|>\\nresult: 925\\n" -> "<answer>925</answer>"), so the policy starts
               using the tool about half of the time and GRPO has to find out that it pays.
Fixed seed; run from the repository root."""
import json
import random

EOT = "<|im_end|>"  # the end of a turn: grpo init-model's eos_token, appended by grpo sft


def main():
    r = random.Random(17)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    r.shuffle(pairs)
    with open("examples/calc/train.jsonl", "w") as f:
        for a, b in pairs[:2000]:
            f.write(json.dumps({"prompt": f"{a}*{b}=", "answer": str(a * b)}) + "\n")
    with open("examples/calc/sft.jsonl", "w") as f:
        for a, b in pairs[2000:5000]:
            p = f"{a}*{b}="
            if r.random() < 0.5:
                f.write(json.dumps({"prompt": p, "response": f"calc: {a}*{b}"}) + "\n")
            else:
                guess = r.randint(100, 9801)
                f.write(json.dumps({"prompt": p, "response": f"<answer>{guess}</answer>"}) + "\n")
            seen = f"{p}calc: {a}*{b}{EOT}\nresult: {a * b}\n"
            f.write(json.dumps({"prompt": seen, "response": f"<answer>{a * b}</answer>"}) + "\n")
    with open("examples/calc/eval.jsonl", "w") as f:
        for a, b in pairs[5000:5300]:
            f.write(json.dumps({"prompt": f"{a}*{b}=", "answer": str(a * b)}) + "\n")


if __name__ == "__main__":
    main()
