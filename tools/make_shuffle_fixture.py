#!/usr/bin/env python3
"""make_shuffle_fixture.py — the data order's permutations, written from the algorithm as
core/io/dataset.h states it (not from the C code), for tests/test_dataset.c:

  epoch e of seed s: splitmix64 seeded with s + e * 0x9E3779B97F4A7C15 (mod 2^64); Fisher-Yates
  for i = n-1 down to 1: j uniform in [0, i] by rejection (draw x; limit = 2^64 - (2^64 mod
  (i+1)); redraw while x >= limit; j = x mod (i+1)); swap perm[i], perm[j].

Usage: python3 tools/make_shuffle_fixture.py [--out tests/fixtures/dataset/shuffle.json]
"""
import argparse
import json

M = 1 << 64
GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(state):
    """One step: returns (new state, output)."""
    state = (state + GOLDEN) % M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M
    return state, z ^ (z >> 31)


def permutation(n, seed, epoch):
    state = (seed + epoch * GOLDEN) % M
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        limit = M - (M % bound)
        while True:
            state, x = splitmix64(state)
            if x < limit:
                break
        j = x % bound
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/dataset/shuffle.json")
    a = ap.parse_args()
    # seeds as strings: JSON readers that hold numbers as doubles lose bits above 2^53
    cases = [{"n": n, "seed": str(seed), "epoch": epoch, "perm": permutation(n, seed, epoch)}
             for n, seed, epoch in [(10, 0, 0), (10, 0, 1), (17, 42, 0), (32, 123456789, 3),
                                    (7, 2**63 + 5, 2)]]
    with open(a.out, "w") as f:
        f.write("[\n" + ",\n".join(" " + json.dumps(c) for c in cases) + "\n]\n")


if __name__ == "__main__":
    main()
