#!/usr/bin/env python3
"""check_peft_load.py BASE ADAPTER [MERGED] — the adapter directory grpo writes (a LoRA run's
checkpoint, `grpo sft --out` with [lora]) loads with peft's own PeftModel.from_pretrained, and
the model `grpo merge-lora BASE ADAPTER MERGED` writes loads in transformers and gives the same
logits as the adapted model (and as peft's merge_and_unload()).

Needs torch, transformers, peft (pip); not run in CI (tests/test_lora.c checks the same files
against committed peft fixtures). Prints the largest logit differences; exits 1 above 1e-4.
"""
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def main():
    base_dir, adapter = sys.argv[1], sys.argv[2]
    merged_dir = sys.argv[3] if len(sys.argv) > 3 else None
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager")
    V = base.config.vocab_size
    ids = torch.randint(3, V, (2, 12))
    with torch.no_grad():
        plain = base(input_ids=ids).logits
        pm = PeftModel.from_pretrained(base, adapter).eval()
        adapted = pm(input_ids=ids).logits
        print(f"peft loaded {adapter}: |adapted - base| max {(adapted - plain).abs().max():.4g}")
        worst = 0.0
        if merged_dir:
            merged = AutoModelForCausalLM.from_pretrained(merged_dir, attn_implementation="eager")
            ours = merged(input_ids=ids).logits
            theirs = pm.merge_and_unload()(input_ids=ids).logits
            worst = max((ours - adapted).abs().max().item(), (ours - theirs).abs().max().item())
            print(f"grpo merge-lora {merged_dir}: |merged - adapted| max "
                  f"{(ours - adapted).abs().max():.3g}, |merged - peft merge| max "
                  f"{(ours - theirs).abs().max():.3g}")
    sys.exit(1 if worst > 1e-4 else 0)


if __name__ == "__main__":
    main()
