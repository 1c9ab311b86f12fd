#!/usr/bin/env python3
"""make_lora_fixtures.py — reference data for LoRA (core/host/lora.c, tests/test_lora.c), made by
peft on the dense fixtures of make_dense_fixtures.py.

For tests/fixtures/dense/{llama,qwen3} it wraps the model in peft's LoraConfig(r=4,
lora_alpha=8, target_modules="all-linear", lora_dropout=0) — rsLoRA for qwen3 — draws A and B
at random (B is zero at PEFT's init, which would hide half the gradient) and writes
tests/fixtures/lora/<name>/; and for the MoE fixture tests/fixtures/moe/minimind2 (MiniMind2's
MoE, rebuilt by make_moe_fixtures.py's reference module) adapters on q_proj, v_proj and every
expert's and shared expert's gate_proj/up_proj/down_proj (not the router), small enough that
every token keeps its experts (top-k margin checked), into tests/fixtures/lora/minimind2/:

  adapter_config.json, adapter_model.safetensors   peft's save_pretrained() of those adapters
  reference.safetensors                            in float64 on the dense fixture's batch:
      logp (B,T)           log softmax(logits)[targets] with the adapters (0 where targets = -1)
      grad.<peft name>     d/d(lora_A / lora_B) of sum(w * logp), w = the batch's dlogp
      merged.<param name>  merge_and_unload()'s weights of every adapted module

Usage: python3 tools/make_lora_fixtures.py [OUTDIR]   (default tests/fixtures/lora)
"""
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_fixture_util as hf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENSE = os.path.join(ROOT, "tests/fixtures/dense")


def make(name, outdir, seed, rslora):
    base_dir = os.path.join(DENSE, name)
    ref = load_file(os.path.join(base_dir, "reference.safetensors"))
    ids, mask, targets = ref["ids"].long(), ref["mask"], ref["targets"].long()
    has = (targets >= 0).double()
    w = ref["dlogp"].double() * has
    model = AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager").eval()
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0,
                     use_rslora=rslora, task_type="CAUSAL_LM")
    pm = get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in pm.named_parameters():
            if "lora_" in pname:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    # no machine's path in a committed file: the base as a path relative to the repository
    pm.peft_config["default"].base_model_name_or_path = f"tests/fixtures/dense/{name}"
    pm.save_pretrained(d)  # adapter_config.json + adapter_model.safetensors, peft's own names
    os.remove(os.path.join(d, "README.md"))  # peft's model card template
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    pm = pm.double()
    B, T = ids.shape
    logits = torch.zeros(B, T, model.config.vocab_size, dtype=torch.float64)
    for b in range(B):  # each row alone on its real tokens (see make_dense_fixtures.py)
        k = int((mask[b] == 0).sum())
        logits[b, k:] = pm(input_ids=ids[b:b + 1, k:]).logits[0]
    lsm = torch.log_softmax(logits, -1)
    logp = lsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * has
    (w * logp).sum().backward()
    out = {"logp": logp.detach()}
    for pname, p in pm.named_parameters():
        if "lora_" in pname:  # peft saves "...lora_A.default.weight" as "...lora_A.weight"
            out["grad." + pname.replace(".default", "")] = p.grad
    merged = pm.merge_and_unload()
    adapted = {k.replace("base_model.model.", "").replace(".lora_A.weight", ".weight")
               for k in load_file(os.path.join(d, "adapter_model.safetensors")) if "lora_A" in k}
    for pname, p in merged.named_parameters():
        if pname in adapted:
            out["merged." + pname] = p.detach()
    hf.save_reference(out, os.path.join(d, "reference.safetensors"))
    os.chmod(os.path.join(d, "reference.safetensors"), 0o644)
    print(f"{name}: {len(adapted)} adapted modules, rslora={rslora}")


def make_moe(name, outdir, seed):
    """MiniMind2 MoE: peft on the reference module, names mapped to the checkpoint's (the
    module keeps the Llama model under .lm)."""
    import json

    from safetensors.torch import save_file

    import make_moe_fixtures as mm
    base_dir = os.path.join(ROOT, "tests/fixtures/moe", name)
    mc = json.load(open(os.path.join(base_dir, "config.json")))
    ref = load_file(os.path.join(base_dir, "reference.safetensors"))
    ids, mask, targets = ref["ids"].long(), ref["mask"], ref["targets"].long()
    has = (targets >= 0).double()
    w = ref["dlogp"].double() * has
    model = mm.MiniMind2(mc)
    sd = {"lm." + k: v for k, v in load_file(os.path.join(base_dir, "model.safetensors")).items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm.lm_head.weight" for k in missing), (missing, unexpected)
    model.lm.tie_weights()
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                     target_modules=["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"])
    dm = get_peft_model(model, cfg).double()
    B, T = ids.shape
    for attempt in range(50):  # adapters that leave every token's top-k experts clear
        g = torch.Generator().manual_seed(seed + 1000 * attempt)
        with torch.no_grad():
            for pname, p in dm.named_parameters():
                if "lora_" in pname:
                    p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
        logits = torch.zeros(B, T, mc["vocab_size"], dtype=torch.float64)
        margin = 1.0
        for b in range(B):
            for moe in dm.base_model.model.moes():
                moe.record = []
            k = int((mask[b] == 0).sum())
            logits[b, k:] = dm.base_model.model.lm(input_ids=ids[b:b + 1, k:]).logits[0]
            for moe in dm.base_model.model.moes():
                margin = min(margin, mm.topk_margin(moe.record[0][0].detach(),
                                                    mc["num_experts_per_tok"]))
        if margin > 1e-3:
            break
        dm.zero_grad()
    else:
        raise SystemExit(f"{name}: no seed keeps the router top-k margins > 1e-3")
    lsm = torch.log_softmax(logits, -1)
    logp = lsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * has
    (w * logp).sum().backward()
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    out, adapters = {"logp": logp.detach()}, {}
    for pname, p in dm.named_parameters():
        if "lora_" in pname:  # base_model.model.lm.model.layers... -> base_model.model.model...
            key = pname.replace(".default", "").replace("base_model.model.lm.", "base_model.model.")
            out["grad." + key] = p.grad
            adapters[key] = p.detach().float().contiguous()
    save_file(adapters, os.path.join(d, "adapter_model.safetensors"), metadata={"format": "pt"})
    conf = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 8,
            "lora_dropout": 0.0, "use_rslora": False, "bias": "none", "fan_in_fan_out": False,
            "target_modules": ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"],
            "base_model_name_or_path": f"tests/fixtures/moe/{name}"}
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    hf.save_reference(out, os.path.join(d, "reference.safetensors"))
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    print(f"{name}: {len(adapters) // 2} adapted modules, router margin {margin:.3g}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/lora")
    make("llama", outdir, seed=99, rslora=False)
    make("qwen3", outdir, seed=100, rslora=True)
    make_moe("minimind2", outdir, seed=101)


if __name__ == "__main__":
    main()
