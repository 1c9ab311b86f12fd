#!/usr/bin/env python3
"""Reference values for the built-in format and tags rewards.

Computes, with Python's own `re` and `str.count`, MiniMind's reasoning rewards (train_grpo.py,
reasoning_model_reward) on hand-written completions, including near misses:
  format: 0.5 if re.match(P1, c, re.S) or re.match(P2, c, re.S) else 0.0
          P1 = ^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$   P2 = same with \\n\\n after </think>
  tags (mark_num): 0.25 for each of <think>, </think>, <answer>, </answer> with count == 1
Writes tests/fixtures/rewards/minimind.jsonl: {"completion", "format", "tags"} per line.
Usage: python3 tools/make_reward_fixtures.py
"""
import json
import os
import re

P1 = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"
P2 = r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$"
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]

COMPLETIONS = [
    "<think>\n2+2 is 4\n</think>\n<answer>\n4\n</answer>",             # exact format
    "<think>\n2+2 is 4\n</think>\n\n<answer>\n4\n</answer>",           # blank line variant
    "<think>\n2+2 is 4\n</think>\n<answer>\n4\n</answer>\n",           # trailing newline: $ allows it
    "<think>\n2+2 is 4\n</think>\n<answer>\n4\n</answer>\n\n",         # two trailing newlines: no
    "<think>2+2 is 4\n</think>\n<answer>\n4\n</answer>",               # missing newline after <think>
    "<think>\n2+2 is 4</think>\n<answer>\n4\n</answer>",               # missing newline before </think>
    "<think>\n2+2 is 4\n</think><answer>\n4\n</answer>",               # missing newline between blocks
    "<think>\n2+2 is 4\n</think>\n\n\n<answer>\n4\n</answer>",         # three newlines
    " <think>\n2+2 is 4\n</think>\n<answer>\n4\n</answer>",            # leading space
    "<think>\nstep 1\nstep 2\n\nstep 3\n</think>\n<answer>\nmulti\nline\n</answer>",  # dot-all bodies
    "<think>\n<think>\nx\n</think>\n<answer>\n4\n</answer>",           # doubled <think>
    "<think>\nx\n</think>\n<answer>\n4\n</answer>\n<answer>\n5\n</answer>",  # doubled answer
    "<think>\nx\n</think>\n</think>\n<answer>\n4\n</answer>",          # doubled </think>
    "<answer>\n4\n</answer>",                                           # no think block
    "The answer is 4.",                                                 # plain text
    "",                                                                 # empty
    "<think>\n\n</think>\n<answer>\n\n</answer>",                       # empty bodies
    "<think>\n思考：二加二\n</think>\n<answer>\n四 🎉\n</answer>",        # unicode
    "<THINK>\nx\n</THINK>\n<answer>\n4\n</answer>",                     # case matters
    "<think>\nx\n</think>\n<answer>\n4\n</answer> trailing",           # text after </answer>
    "<think><think>\nx\n</think>\n<answer>\n4\n</answer>",             # adjacent doubled tag
    "<thin k>\nx\n</think>\n<answer>\n4\n</answer>",                   # broken tag
]


def format_reward(c):
    return 0.5 if (re.match(P1, c, re.S) or re.match(P2, c, re.S)) else 0.0


def tags_reward(c):
    return sum(0.25 for t in TAGS if c.count(t) == 1)


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "rewards", "minimind.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for c in COMPLETIONS:
            f.write(json.dumps({"completion": c, "format": format_reward(c), "tags": tags_reward(c)},
                               ensure_ascii=False) + "\n")
    print(f"wrote {len(COMPLETIONS)} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
