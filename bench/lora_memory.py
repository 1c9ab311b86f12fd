#!/usr/bin/env python3
"""lora_memory.py — peak RSS of `grpo train` steps with LoRA (r = 16, all-linear) against full
fine-tuning, and with the LoRA base held in bf16 (lora.base_dtype = bf16), on two random-init
shapes (issue 15):

  minimind2-small  hidden 512, 8 layers, 8/2 heads, intermediate 1408, vocab 6400, tied (26M)
  qwen2.5-0.5b     hidden 896, 24 layers, 14/2 heads, intermediate 4864, vocab 151936, tied,
                   q/k/v bias (Qwen2ForCausalLM, 494M)

Each run: 2 GRPO steps of 1 prompt x 4 completions x 32 new tokens, beta = 0.02 (full
fine-tuning loads a reference copy; LoRA's reference is the base with the adapters off), 2
threads; /usr/bin/time -v gives the peak RSS and the CPU time. The models are made once with
transformers under build/bench_lora/ (the tokenizer: bench_grpo_step's, MiniMind2's with no EOS,
so every row generates all 32 tokens). Prints a Markdown table for BENCHMARKS.md.

Usage: python3 bench/lora_memory.py [GRPO_BINARY] [--only minimind2-small|qwen2.5-0.5b]
                                    [--variants full,lora,lora-bf16]
"""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "build", "bench_lora")
SHAPES = {
    "minimind2-small": dict(cls="LlamaForCausalLM", hidden_size=512, num_hidden_layers=8,
                            num_attention_heads=8, num_key_value_heads=2, intermediate_size=1408,
                            vocab_size=6400),
    "qwen2.5-0.5b": dict(cls="Qwen2ForCausalLM", hidden_size=896, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
                         vocab_size=151936),
}


def make(name, shape, tok_dir):
    d = os.path.join(OUT, name)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    import torch
    import transformers
    s = dict(shape)
    cls = getattr(transformers, s.pop("cls"))
    cfg_cls = getattr(transformers, cls.__name__.replace("ForCausalLM", "Config"))
    cfg = cfg_cls(**s, max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  bos_token_id=1, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    model = cls(cfg)
    model.save_pretrained(d, safe_serialization=True)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), d)
    print(f"wrote {d}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters",
          file=sys.stderr)
    return d


VARIANTS = {"full": "", "lora": "[lora]\nr = 16\nalpha = 32\n",
            "lora-bf16": "[lora]\nr = 16\nalpha = 32\nbase_dtype = bf16\n"}


def run(grpo, model, variant):
    tag = variant + "-" + os.path.basename(model)
    ini = os.path.join(OUT, tag + ".ini")
    prompts = os.path.join(ROOT, "bench", "bench_grpo_step_prompts.jsonl")
    with open(ini, "w") as f:
        f.write(f"[model]\npath = {model}\n[data]\npath = {prompts}\nchat_template = {{prompt}}\n"
                "[sampling]\nnum_generations = 4\nmax_completion_length = 32\n"
                "[grpo]\nloss_type = grpo\nbeta = 0.02\n[optim]\nlr = 1e-5\n"
                + VARIANTS[variant]
                + "[train]\nsteps = 2\nbatch_prompts = 1\nseed = 1\nthreads = 2\n"
                f"[log]\ndir = {OUT}/runs/{tag}\n[checkpoint]\ndir = {OUT}/runs/{tag}/ckpt\n"
                "every = 0\n[reward.len]\nplugin = builtin.length\n")
    shutil.rmtree(os.path.join(OUT, "runs", tag), ignore_errors=True)
    p = subprocess.run(["/usr/bin/time", "-v", grpo, "train", ini], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{tag}: grpo train failed:\n{p.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", p.stderr).group(1))
    sys_t = float(re.search(r"System time \(seconds\): ([\d.]+)", p.stderr).group(1))
    return rss / 1024.0, user + sys_t


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    grpo = args[0] if args else os.path.join(ROOT, "build", "grpo")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    tok = os.path.join(ROOT, "build", "bench_grpo_step", "model")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        raise SystemExit(f"{tok}: run python3 bench/bench_grpo_step_torch.py --make {tok} first")
    variants = (sys.argv[sys.argv.index("--variants") + 1].split(",") if "--variants" in sys.argv
                else list(VARIANTS))
    print("| shape | " + " | ".join(f"{v} peak RSS (CPU s)" for v in variants) + " |")
    print("|---|" + "---|" * len(variants))
    for name, shape in SHAPES.items():
        if only and name != only:
            continue
        d = make(name, shape, tok)
        cells = []
        for v in variants:
            rss, cpu = run(grpo, d, v)
            cells.append(f"{rss:.0f} MiB ({cpu:.0f})")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
