#!/usr/bin/env python3
"""Checks that files written by grpo's safetensors writer load in the reference libraries.

  check_safetensors_roundtrip.py FILE.safetensors [...]
      loads each with safetensors (whose Rust core validates the header, offsets and sizes)
      and prints name, dtype, shape; checks __metadata__ == {"format": "pt"}.
  check_safetensors_roundtrip.py --hf-dir OURS --reference REF
      loads both model directories with transformers AutoModelForCausalLM and checks every
      parameter of OURS equals REF (exactly for F32, after REF's own bf16 rounding for BF16).

The test suite leaves its writer output under BUILD/safetensors_out/ (test_safetensors and
test_safetensors_hfdir); run this script on those files. Exit status 0 = all good.
"""
import argparse
import os
import sys

import torch
from safetensors import safe_open


def check_file(path):
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        assert meta == {"format": "pt"}, f"{path}: __metadata__ is {meta}"
        for name in f.keys():
            t = f.get_tensor(name)
            print(f"{path}: {name} {t.dtype} {list(t.shape)}")
    return 0


def check_hf_dir(ours, ref):
    from transformers import AutoModelForCausalLM
    a = AutoModelForCausalLM.from_pretrained(ours, dtype="auto")
    b = AutoModelForCausalLM.from_pretrained(ref, dtype=torch.float32)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys(), f"parameter names differ: {set(sa) ^ set(sb)}"
    with safe_open(os.path.join(ours, "model.safetensors"), framework="pt") as f:
        stored = {k: f.get_slice(k).get_dtype() for k in f.keys()}
    for k in sa:
        # the reference rounded the way torch rounds to the dtype our file stores
        rounded = sb[k].to(torch.bfloat16) if stored.get(k) == "BF16" else sb[k]
        want = rounded.to(sa[k].dtype)
        if not torch.equal(sa[k], want):
            print(f"{ours}: {k} differs from {ref}", file=sys.stderr)
            return 1
    print(f"{ours}: {len(sa)} tensors load in transformers and equal {ref} ({a.dtype})")
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="*")
    p.add_argument("--hf-dir")
    p.add_argument("--reference")
    args = p.parse_args()
    rc = 0
    for f in args.files:
        rc |= check_file(f)
    if args.hf_dir:
        rc |= check_hf_dir(args.hf_dir, args.reference)
    return rc


if __name__ == "__main__":
    sys.exit(main())
