#!/usr/bin/env python3
"""bench_tokenizer.py — encode throughput of Hugging Face `tokenizers` on the benchmark corpus, the
reference for bench/bench_tokenizer.c (same corpus file, same tokenizer, same per-line calls).

The corpus (written once to --corpus when missing, deterministic): ~70% Python standard-library
source (English identifiers, comments, docstrings, indentation runs) and ~30% generated Chinese
sentences with numbers and punctuation, one encode call per line.

Prints, for a fresh tokenizer: pass 1 (cold word cache) and pass 2 (warm) in MB/s, single-threaded
`Tokenizer.encode` per line, plus `encode_batch` (Rust threads) for reference, and the number of
ids and a checksum of them so the C benchmark can show it produced the same ids.

Usage: python3 bench/bench_tokenizer.py --tokenizer DIR_OR_JSON [--corpus build/bench_tokenizer_corpus.txt]
"""
import argparse
import glob
import os
import random
import sysconfig
import time

from tokenizers import Tokenizer

ZH = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学"
      "法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政"
      "四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立")


def make_corpus(path, target_bytes=4 << 20):
    rng = random.Random(7)
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    lines, size = [], 0
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.rstrip("\n")
                lines.append(line)
                size += len(line.encode()) + 1
                if rng.random() < 0.45:  # interleave Chinese: ~30% of the bytes
                    zh = "".join(rng.choice(ZH) for _ in range(rng.randint(8, 40)))
                    zh += rng.choice(["。", "，", "！", "？", f"{rng.randint(0, 99999)}。", "：“引用”。"])
                    lines.append(zh)
                    size += len(zh.encode()) + 1
        if size >= target_bytes:
            break
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def checksum(all_ids):
    h, n = 0, 0
    for ids in all_ids:
        for i in ids:
            h = (h * 1000003 + i + 1) & 0xFFFFFFFFFFFFFFFF
            n += 1
    return n, h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", default="build/bench_tokenizer_corpus.txt")
    args = ap.parse_args()
    if not os.path.exists(args.corpus):
        make_corpus(args.corpus)
    with open(args.corpus, encoding="utf-8") as fh:
        lines = fh.read().split("\n")[:-1]
    mb = sum(len(l.encode()) for l in lines) / 1e6
    path = args.tokenizer
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    tok = Tokenizer.from_file(path)
    for p in (1, 2):
        t0 = time.perf_counter()
        out = [tok.encode(l).ids for l in lines]
        dt = time.perf_counter() - t0
        print(f"tokenizers encode pass {p}: {mb:.2f} MB in {dt:.3f} s = {mb / dt:.2f} MB/s")
    n, h = checksum(out)
    t0 = time.perf_counter()
    tok.encode_batch(lines)
    dt = time.perf_counter() - t0
    print(f"tokenizers encode_batch ({os.cpu_count()} cpus): {mb / dt:.2f} MB/s")
    print(f"ids: {n} checksum {h:016x}")


if __name__ == "__main__":
    main()
