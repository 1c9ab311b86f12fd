#!/usr/bin/env python3
"""Reference values for the built-in format and tags rewards.

Computes, with Python's own `re` and `str.count`, MiniMind's reasoning rewards (train_grpo.py,
reasoning_model_reward) on hand-written completions, including near misses:
  format: 0.5 if re.match(P1, c, re.S) or re.match(P2, c, re.S) else 0.0
          P1 = ^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$   P2 = same with \\n\\n after </think>
  tags (mark_num): 0.25 for each of <think>, </think>, <answer>, </answer> with count == 1
Writes tests/fixtures/rewards/minimind.jsonl: {"completion", "format", "tags"} per line.

Also MiniMind HEAD's (trainer/train_grpo.py) length window and repetition penalty:
  length: 0.5 if 20 <= len(c.strip()) <= 800 else -0.5
  repetition: -rep_penalty(answer) with answer = text after the first </think> (stripped) when
    present, rep_penalty(text, n=3, cap=0.5) = min(cap, (G - len(set(grams))) * cap * 2 / G) over
    the 3-grams of re.findall(r"\w+|[^\w\s]", text.lower()), 0 when there are none
into tests/fixtures/rewards/minimind_head.jsonl: {"completion", "length", "repetition"}.
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


HEAD_COMPLETIONS = [
    "short",
    "x" * 19, "x" * 20, "y" * 800, "y" * 801,
    "  " + "z" * 20 + "\n\n",                                      # stripped before counting
    "数" * 20,                                                       # code points, not bytes
    "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.",
    "one two three four five six seven eight nine ten",
    "a b a b a b a b a b",
    "<think>\nthe the the the\n</think>\nall different words here now",
    "<think>\nfine\n</think>\nla la la la la la la la la",
    "The Cat, the cat; THE CAT! the cat?",                           # lower-casing and punctuation
    "ÉCOLE école ÉCOLE école ÉCOLE école",                           # non-ASCII lower-casing
    "答案是 42。答案是 42。答案是 42。",
    "",
    "!!!",
    "a b c d e f a b c x y z w v u t s r q p",                       # one repeat in 18: partial
    "it is what it is and it is what it is not quite what it was",   # partial penalty
]


def rep_penalty(text, n=3, cap=0.5):
    toks = re.findall(r"\w+|[^\w\s]", text.lower())
    grams = [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]
    return min(cap, (len(grams) - len(set(grams))) * cap * 2 / len(grams)) if grams else 0.0


def head_rewards(c):
    length = 0.5 if 20 <= len(c.strip()) <= 800 else -0.5
    answer = c.split("</think>", 1)[1].strip() if "</think>" in c else c
    return {"completion": c, "length": length, "repetition": -rep_penalty(answer)}


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "rewards", "minimind.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for c in COMPLETIONS:
            f.write(json.dumps({"completion": c, "format": format_reward(c), "tags": tags_reward(c)},
                               ensure_ascii=False) + "\n")
    print(f"wrote {len(COMPLETIONS)} cases to {os.path.normpath(out)}")
    out = os.path.join(os.path.dirname(out), "minimind_head.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for c in HEAD_COMPLETIONS:
            f.write(json.dumps(head_rewards(c), ensure_ascii=False) + "\n")
    print(f"wrote {len(HEAD_COMPLETIONS)} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
