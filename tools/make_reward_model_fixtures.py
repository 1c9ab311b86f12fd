#!/usr/bin/env python3
"""make_reward_model_fixtures.py — reference data for the reward-model scorer
(plugins/rewards/reward_model, tests/test_reward_model.c).

Builds three tiny random reward models, each a Hugging Face directory under
tests/fixtures/reward_model/<name>/ (config.json, model.safetensors fp32, tokenizer.json from
tests/fixtures/tokenizer/tiny/ (V = 517), tokenizer_config.json with a chat template):

  llama     LlamaForSequenceClassification, num_labels 1, pad_token_id 0 (<|endoftext|>);
            template {{ bos_token }} + ChatML turns ending "<|im_end|>\\n"
  qwen2     Qwen2ForSequenceClassification, num_labels 2, pad_token_id 2 == eos (<|im_end|>);
            template without the final newline, so every text ENDS with pad tokens and
            transformers scores the token before them (one sample ends "...<|im_end|><|im_end|>")
  internlm2 InternLM2ForRewardModel (InternLM2 names, packed wqkv interleaved by kv group,
            NH 6 / NKV 2 so a group holds 3 query heads, "bias": true, v_head, reward_token_id
            516); the reward token is appended to the text's ids. There is no InternLM2 class in
            transformers, so the expected scores come from tools/internlm2_reference.py, which is
            checked here against transformers' LlamaModel holding the same weights unpacked
            (pack_wqkv builds the packed tensor from Llama's separate q/k/v).

expected.json holds, per model, the samples (messages, completion) and what transformers makes
of each text the scorer builds (messages + the completion as an assistant turn, rendered with the
model's chat template by apply_chat_template(tokenize=False), tokenized without special tokens):
text, ids (InternLM2: with the reward token), index (the token scored: transformers' rightmost
non-pad rule, InternLM2's last token) and raw (the model's score, label 0, float64 model). The
"answer" entries do the same for the <answer> content (MiniMind's blend). "plugin" lists run-file
options and the rewards the scorer must give with them, computed here from raw scores by the
rules the plugin documents (scale/shift, clip, blend 0.4/0.6, keep the last max_length tokens).

Usage: python3 tools/make_reward_model_fixtures.py [OUTDIR]   (default tests/fixtures/reward_model)
"""
import copy
import json
import os
import re
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import (AutoTokenizer, LlamaConfig, LlamaForSequenceClassification, LlamaModel,
                          Qwen2Config, Qwen2ForSequenceClassification)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import internlm2_reference as ilm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = os.path.join(ROOT, "tests/fixtures/tokenizer/tiny")
V = 517
REWARD_TOKEN = 516

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
          "{% endfor %}")
TEMPLATES = {
    "llama": "{{ bos_token }}" + CHATML,
    "qwen2": ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
              "{% if not loop.last %}\n{% endif %}{% endfor %}"),
    "internlm2": "{{ bos_token }}" + CHATML,
}

SAMPLES = [
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}],
     "hi there, friend"),
    ([{"role": "user", "content": "What is 6*7?"}],
     "<think>\nsix times seven\n</think>\n<answer> 42 </answer>"),
    ([{"role": "user", "content": "你好"}], "你好! foo_bar baz"),
    ([{"role": "user", "content": "Stop."}], "done<|im_end|>"),
    ([{"role": "user", "content": "Long one, please."}],
     "<answer>yes</answer> and then a much longer tail of words so that the rows differ in "
     "length by a lot, which exercises padding in a batch"),
]

# Run-file options and the rewards the plugin must give (computed in plugin_reference()).
PLUGIN_CASES = {
    "llama": [{"scale": 2.0, "shift": -0.5, "clip": 0.0, "text": "full", "max_length": 0,
               "batch_size": 2}],
    "qwen2": [{"scale": 1.0, "shift": 0.0, "clip": 1.0, "text": "full", "max_length": 0,
               "batch_size": 8}],
    "internlm2": [{"scale": 1.0, "shift": 0.0, "clip": 3.0, "text": "minimind", "max_length": 0,
                   "batch_size": 3},
                  {"scale": 1.0, "shift": 0.0, "clip": 0.0, "text": "full", "max_length": 12,
                   "batch_size": 1}],
}

COMMON = dict(vocab_size=V, num_hidden_layers=2, intermediate_size=64,
              max_position_embeddings=256, bos_token_id=1, eos_token_id=2)


def randomize(model, g, head_std):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.startswith("score") or name.startswith("v_head"):
                p.copy_(head_std * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def write_tokenizer(d, name):
    shutil.copy(os.path.join(TOK, "tokenizer.json"), d)
    with open(os.path.join(TOK, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc["chat_template"] = TEMPLATES[name]
    tc["pad_token"] = "<|im_end|>" if name == "qwen2" else "<|endoftext|>"
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=1, ensure_ascii=False)


def render(tok, messages, completion):
    msgs = messages + [{"role": "assistant", "content": completion}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    return text, tok(text, add_special_tokens=False)["input_ids"]


def answer_of(completion):
    m = re.search(r"<answer>(.*?)</answer>", completion, re.DOTALL)
    return m.group(1).strip() if m else None


# ---- scorers: ids -> (index, raw) ----------------------------------------------------------

def seqcls_scorer(model):
    dm = copy.deepcopy(model).double()
    pad = model.config.pad_token_id

    def score(ids):
        with torch.no_grad():
            raw = dm(input_ids=torch.tensor([ids])).logits[0, 0].item()
        nonpad = [i for i, t in enumerate(ids) if t != pad]
        return (nonpad[-1] if nonpad else 0), raw
    return score


def batch_check(model, rows, singles):
    """transformers on a right-padded batch gives the single-row scores (fp32 model)."""
    pad = model.config.pad_token_id
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), pad)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits[:, 0]
    err = (got.double() - torch.tensor(singles)).abs().max().item()
    assert err < 1e-4, f"padded batch differs from single rows by {err}"


def internlm2_scorer(sd, cfg):
    def score(ids):
        return len(ids) - 1, ilm.reward(sd, cfg, ids)
    return score


# ---- the plugin's rules --------------------------------------------------------------------

def plugin_reference(case, samples_out, kind):
    out = []
    for s in samples_out:
        vals = []
        for key in ("full", "answer"):
            e = s.get(key)
            if e is None:
                vals.append(None)
                continue
            ids = e["text_ids"]
            L = case["max_length"]
            if L:
                keep = L - 1 if kind == "internlm2" else L
                ids = ids[-keep:]
            if kind == "internlm2":
                ids = ids + [REWARD_TOKEN]
            raw = s["_scorer"](ids)[1]
            v = case["scale"] * raw + case["shift"]
            if case["clip"] > 0:
                v = max(-case["clip"], min(case["clip"], v))
            vals.append(v)
        r = vals[0]
        if case["text"] == "minimind" and vals[1] is not None:
            r = 0.4 * vals[0] + 0.6 * vals[1]
        out.append(r)
    return out


def make_internlm2(d, g):
    cfg = dict(architectures=["InternLM2ForRewardModel"], model_type="internlm2",
               hidden_size=48, num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-6,
               rope_theta=10000.0, bias=True, hidden_act="silu", tie_word_embeddings=False,
               rope_scaling={"type": "dynamic", "factor": 2.0}, reward_token_id=REWARD_TOKEN,
               pad_token_id=0, torch_dtype="float32", **COMMON)
    lc = LlamaConfig(hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
                     rms_norm_eps=1e-6, attention_bias=True, tie_word_embeddings=False,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **COMMON)
    lc._attn_implementation = "eager"
    llama = LlamaModel(lc).eval()
    randomize(llama, g, 0)
    ls = {k: v.double() for k, v in llama.state_dict().items()}
    nh, nkv, hd = 6, 2, 8
    sd = {"model.tok_embeddings.weight": ls["embed_tokens.weight"],
          "model.norm.weight": ls["norm.weight"],
          "v_head.weight": 0.6 * torch.randn(1, 48, generator=g, dtype=torch.float64)}
    for l in range(2):
        p = lambda n: ls[f"layers.{l}.{n}"]
        o = f"model.layers.{l}."
        sd[o + "attention_norm.weight"] = p("input_layernorm.weight")
        sd[o + "ffn_norm.weight"] = p("post_attention_layernorm.weight")
        for kind in ("weight", "bias"):
            sd[o + f"attention.wqkv.{kind}"] = ilm.pack_wqkv(
                p(f"self_attn.q_proj.{kind}"), p(f"self_attn.k_proj.{kind}"),
                p(f"self_attn.v_proj.{kind}"), nh, nkv, hd)
        sd[o + "attention.wo.weight"] = p("self_attn.o_proj.weight")
        sd[o + "attention.wo.bias"] = p("self_attn.o_proj.bias")
        sd[o + "feed_forward.w1.weight"] = p("mlp.gate_proj.weight")
        sd[o + "feed_forward.w3.weight"] = p("mlp.up_proj.weight")
        sd[o + "feed_forward.w2.weight"] = p("mlp.down_proj.weight")
    # the check: our InternLM2 math on the packed weights == transformers' Llama on q/k/v
    ids = torch.randint(3, V, (11,), generator=g)
    with torch.no_grad():
        want = llama.double()(input_ids=ids[None]).last_hidden_state[0]
    got = ilm.hidden(sd, cfg, ids)
    err = (got - want).abs().max().item()
    # transformers builds RoPE's inv_freq in fp32 even in a double model (~1e-7 relative); a
    # wrong packing or head order moves hidden states by O(1)
    assert err < 1e-5, f"InternLM2 reference vs transformers Llama: {err}"
    print(f"internlm2: reference == transformers LlamaModel (packed wqkv), max err {err:.2e}")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    save_file({k: v.float().contiguous() for k, v in sd.items()},
              os.path.join(d, "model.safetensors"))
    return internlm2_scorer(sd, cfg)


def make_seqcls(name, d, g):
    if name == "llama":
        cfg = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                          rms_norm_eps=1e-5, num_labels=1, pad_token_id=0,
                          rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
                          **COMMON)
        cls = LlamaForSequenceClassification
    else:
        cfg = Qwen2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                          rms_norm_eps=1e-6, num_labels=2, pad_token_id=2,
                          tie_word_embeddings=False,
                          rope_parameters={"rope_type": "default", "rope_theta": 20000.0},
                          **COMMON)
        cls = Qwen2ForSequenceClassification
    cfg._attn_implementation = "eager"
    model = cls(cfg).eval()
    randomize(model, g, 3.0 / 32 ** 0.5 * 2)
    model.save_pretrained(d)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    return model, seqcls_scorer(model)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT,
                                                                "tests/fixtures/reward_model")
    expected = {}
    for seed, name in enumerate(["llama", "qwen2", "internlm2"]):
        g = torch.Generator().manual_seed(4321 + seed)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        write_tokenizer(d, name)
        model = None
        if name == "internlm2":
            scorer = make_internlm2(d, g)
        else:
            model, scorer = make_seqcls(name, d, g)
        tok = AutoTokenizer.from_pretrained(d)
        samples = []
        for messages, completion in SAMPLES:
            s = {"messages": messages, "completion": completion, "_scorer": scorer}
            for key, content in (("full", completion), ("answer", answer_of(completion))):
                if content is None:
                    continue
                text, tids = render(tok, messages, content)
                ids = tids + ([REWARD_TOKEN] if name == "internlm2" else [])
                index, raw = scorer(ids)
                s[key] = {"text": text, "text_ids": tids, "ids": ids, "index": index, "raw": raw}
            samples.append(s)
        if model is not None:
            batch_check(model, [s["full"]["ids"] for s in samples],
                        [s["full"]["raw"] for s in samples])
        plugin = [dict(case, rewards=plugin_reference(case, samples, name))
                  for case in PLUGIN_CASES[name]]
        for s in samples:
            del s["_scorer"]
            for key in ("full", "answer"):
                if key in s:
                    del s[key]["text_ids"]
        expected[name] = {"samples": samples, "plugin": plugin}
        raws = [round(s["full"]["raw"], 3) for s in samples]
        print(f"{name}: raw scores {raws}; indices {[s['full']['index'] for s in samples]} "
              f"of lengths {[len(s['full']['ids']) for s in samples]}")
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
