#!/usr/bin/env python3
"""tokenizer_parity.py — random-text parity check of `grpo tokenize` against Hugging Face `tokenizers`.

Generates N random lines (mixtures of code points from many Unicode blocks, every kind of
whitespace, digits, punctuation, special tokens of the tokenizer) with a fixed seed, encodes them
with both and reports how many agree, printing the first disagreements. A development tool: the
committed tests use the fixtures written by make_tokenizer_fixtures.py.

Usage: python3 tools/tokenizer_parity.py --grpo build/grpo --tokenizer DIR_OR_JSON [--n 5000] [--seed 1]
"""
import argparse
import json
import os
import random
import subprocess

from tokenizers import Tokenizer

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
          (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1680, 0x1680), (0x2000, 0x206F),
          (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2190, 0x22FF), (0x2460, 0x24FF), (0x3000, 0x303F),
          (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF),
          (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF)]
WHITESPACE = [" ", "  ", "\t", "\u000b", "\u000c", "\r", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2007",
              "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u180e"]
PUNCT = list("'\"!?.,;:()[]{}<>-_=+*/\\|@#$%^&~`") + ["'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t"]


def random_line(rng, specials):
    parts = []
    for _ in range(rng.randint(1, 30)):
        k = rng.random()
        if k < 0.4:
            lo, hi = rng.choice(BLOCKS)
            parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
        elif k < 0.6:
            parts.append(rng.choice(WHITESPACE) * rng.randint(1, 3))
        elif k < 0.75:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        elif k < 0.9:
            parts.append(rng.choice(PUNCT))
        elif specials:
            parts.append(rng.choice(specials))
    s = "".join(parts)
    return "".join(c for c in s if not (0xD800 <= ord(c) <= 0xDFFF) and c not in "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpo", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    path = args.tokenizer
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    tok = Tokenizer.from_file(path)
    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    rng = random.Random(args.seed)
    lines = [random_line(rng, specials) for _ in range(args.n)]
    out = subprocess.run([args.grpo, "tokenize", "--tokenizer", args.tokenizer], check=True,
                         input="\n".join(lines) + "\n", capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(lines), (len(out), len(lines))
    bad = 0
    for line, got in zip(lines, out):
        want = tok.encode(line).ids
        if json.loads(got) != want:
            bad += 1
            if bad <= 5:
                print(f"MISMATCH {line!r}\n  tokenizers {want}\n  grpo       {json.loads(got)}")
    print(f"{args.tokenizer}: {len(lines) - bad}/{len(lines)} random lines match")


if __name__ == "__main__":
    main()
