#!/usr/bin/env python3
"""Writes the safetensors reference fixtures for tests/test_safetensors*.c.

Every file is written by the reference `safetensors` library (torch API); expected.json holds,
for each file and tensor, the dtype and shape and the values as the reference converts them to
float32 (torch `.float()`), written as uint32 bit patterns so that inf, NaN and -0 compare exactly.

Usage: python3 tools/make_safetensors_fixtures.py [OUT_DIR]   (default tests/fixtures/safetensors)
"""
import json
import os
import struct
import sys

import torch
from safetensors.torch import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "tests", "fixtures", "safetensors")


def f32_bits(t):
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in t.float().flatten().tolist()]


def describe(tensors):
    out = {}
    for name, t in tensors.items():
        dtype = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                 torch.int64: "I64"}[t.dtype]
        entry = {"dtype": dtype, "shape": list(t.shape)}
        if dtype != "I64":
            entry["f32_bits"] = f32_bits(t)
        out[name] = entry
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    expected = {}

    f32 = {
        "a": torch.randn(2, 3, generator=g),
        "layer.0.bias": torch.randn(5, generator=g),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
        "special": torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"),
                                 1e-45, 3.4028234663852886e38]),
    }
    save_file(f32, os.path.join(OUT, "f32.safetensors"), metadata={"format": "pt"})
    expected["f32.safetensors"] = describe(f32)

    half_special = [0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0,
                    2.0 ** -24, -(2.0 ** -24), 1023 * 2.0 ** -24, 2.0 ** -14,
                    float("inf"), float("-inf"), float("nan"), 0.333251953125]
    f16 = {
        "special": torch.tensor(half_special, dtype=torch.float16),
        "rand": torch.randn(3, 4, generator=g).to(torch.float16),
    }
    save_file(f16, os.path.join(OUT, "f16.safetensors"), metadata={"format": "pt"})
    expected["f16.safetensors"] = describe(f16)

    bf_special = [0.0, -0.0, 1.0, -2.5, 3.3895313892515355e38, 2.0 ** -133, -(2.0 ** -126),
                  float("inf"), float("-inf"), float("nan"), 1.00390625]
    bf16 = {
        "special": torch.tensor(bf_special, dtype=torch.float32).to(torch.bfloat16),
        "rand": torch.randn(2, 2, 3, generator=g).to(torch.bfloat16),
    }
    save_file(bf16, os.path.join(OUT, "bf16.safetensors"))  # no __metadata__ at all
    expected["bf16.safetensors"] = describe(bf16)

    # an I64 buffer next to a float weight: loading the I64 one must be refused clearly
    mixed = {"w": torch.randn(2, 2, generator=g), "position_ids": torch.arange(6).view(1, 6)}
    save_file(mixed, os.path.join(OUT, "mixed.safetensors"), metadata={"format": "pt"})
    expected["mixed.safetensors"] = describe(mixed)

    # rounding reference: fp32 inputs and torch's own bf16 of them (round to nearest even)
    inp = torch.tensor([1.0 + 2.0 ** -9, 1.0 + 3 * 2.0 ** -9, -(1.0 + 2.0 ** -9), 3.0e38, 3.4e38,
                        1e-40, -1e-40, 2.0 ** -134, 0.1, -0.1, 65504.0, 1.0 / 3.0,
                        float("inf"), float("nan"), -float("nan")], dtype=torch.float32)
    inp = torch.cat([inp, torch.randn(64, generator=g) * 100])
    save_file({"input": inp, "torch_bf16": inp.to(torch.bfloat16)},
              os.path.join(OUT, "bf16_rounding.safetensors"))

    # a 2-shard checkpoint with an index, as transformers writes it
    shard_dir = os.path.join(OUT, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    s1 = {"model.embed_tokens.weight": torch.randn(4, 3, generator=g),
          "model.norm.weight": torch.randn(3, generator=g)}
    s2 = {"lm_head.weight": torch.randn(4, 3, generator=g).to(torch.bfloat16)}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    total = 0
    for shard, tensors in zip(names, [s1, s2]):
        save_file(tensors, os.path.join(shard_dir, shard), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = shard
            total += t.numel() * t.element_size()
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    expected["sharded/model.safetensors.index.json"] = describe({**s1, **s2})
    with open(os.path.join(shard_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")

    make_tiny_llama(os.path.join(OUT, "tiny_llama"))


def make_tiny_llama(path):
    """A real Hugging Face model directory (config.json + model.safetensors), tiny."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(path, safe_serialization=True)
    # what `grpo model info` must report, from the reference's own view of the model
    info = {"architectures": cfg.architectures, "model_type": cfg.model_type,
            "n_params": sum(p.numel() for p in model.state_dict().values()),
            "n_tensors": len(model.state_dict())}
    with open(path + "_expected.json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
