#!/usr/bin/env python3
"""check_hf_load.py — does a directory saved by grpo load in transformers, cleanly?

For each DIR: AutoModelForCausalLM.from_pretrained(DIR) must report no missing, unexpected or
mismatched keys and log no warnings; with --ref REFDIR the loaded parameters must equal those of
REFDIR exactly (a save of an unmodified model is lossless), and a tied model must come back tied.

Make the directories with the dense test (it saves each fixture model through grpo_model_save):
  GRPO_TEST_KEEP_SAVED=/tmp/saved build/tests/test_dense
  python3 tools/check_hf_load.py /tmp/saved/llama --ref tests/fixtures/dense/llama ...
Exit status 0 when every directory passes.
"""
import argparse
import logging
import sys
import warnings

import torch
import transformers
from transformers import AutoModelForCausalLM


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def check(path, ref):
    handler = Collect()
    transformers.utils.logging.get_logger().addHandler(handler)
    transformers.utils.logging.set_verbosity_warning()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
    transformers.utils.logging.get_logger().removeHandler(handler)
    problems = [f"{k}: {v}" for k, v in info.items() if v]
    problems += [f"log: {m}" for m in handler.records]
    problems += [f"warning: {w.message}" for w in caught]
    if ref:
        want = AutoModelForCausalLM.from_pretrained(ref).state_dict()
        got = model.state_dict()
        if sorted(got) != sorted(want):
            problems.append(f"parameter names differ: {sorted(set(got) ^ set(want))}")
        problems += [f"{k} differs" for k in want if k in got and not torch.equal(got[k], want[k])]
    if model.config.tie_word_embeddings and \
            model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        problems.append("tie_word_embeddings but lm_head is not tied")
    print(f"{path}: {type(model).__name__}, {sum(p.numel() for p in model.parameters())} params: "
          + ("OK (no missing/unexpected keys, no warnings)" if not problems else "FAIL"))
    for p in problems:
        print("   ", p)
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--ref", nargs="*", default=[], help="reference dirs, one per DIR")
    a = ap.parse_args()
    refs = a.ref + [None] * (len(a.dirs) - len(a.ref))
    ok = all([check(d, r) for d, r in zip(a.dirs, refs)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
