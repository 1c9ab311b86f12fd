#!/usr/bin/env python3
"""make_tokenizer_fixtures.py — reference data for the C tokenizer, made by Hugging Face `tokenizers`.

Writes, under tests/fixtures/tokenizer/:
  corpus.json            the parity corpus: a list of entries, each {"text": str} or, for inputs that
                         are not valid UTF-8, {"hex": "<the raw bytes in hex>"}.
  tiny/                  a byte-level BPE tokenizer trained here (vocab 512) on a generated corpus, with
                         special tokens and added tokens that carry every flag (lstrip, rstrip,
                         single_word, normalized). Tests always use it.
  variants/<name>/       the same model with other pre-tokenizers / merges formats / post-processors
                         (Split with each behaviour, invert, ByteLevel add_prefix_space, "a b" merges,
                         ignore_merges, TemplateProcessing).
  expected_<name>.json   for tiny, each variant and (when present) the shared MiniMind tokenizers:
                         {"encode": [ids per corpus entry, add_special_tokens=True],
                          "encode_plain": [ids per entry, add_special_tokens=False; only where it
                                           differs from "encode"],
                          "decode": [text per entry: decode(encode[i], skip_special_tokens=False)],
                          "decode_skip": [same with skip_special_tokens=True],
                          "decode_cases": [{"ids": [...], "text": str, "text_skip": str}, ...]}
                         (a decoded text holding U+0000 is written {"hex": its UTF-8 bytes})
                         (variants only get "encode"/"encode_plain": their decoder is tiny's).
                         tiny and MiniMind also get "config": bos/eos/pad ids and the chat template's
                         byte length and FNV-1a 64 hash, as transformers' AutoTokenizer reads them.

Invalid UTF-8: a Python str (and a Rust &str, which is what `tokenizers` takes) cannot hold invalid
UTF-8. The contract of the C tokenizer is that it replaces each maximal invalid subsequence of its
input by U+FFFD, exactly as Python's bytes.decode("utf-8", "replace") and Rust's
String::from_utf8_lossy do; so the reference ids for a {"hex": ...} entry are those `tokenizers`
gives for bytes.fromhex(hex).decode("utf-8", "replace").

The shared tokenizers are read from $GRPO_SHARED_DIR/data (default ../shared/data beside the project); only ids and
strings produced from them are written here, never the tokenizer files themselves.

Usage: python3 tools/make_tokenizer_fixtures.py [--out tests/fixtures/tokenizer]
"""
import argparse
import copy
import json
import os
import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers, AddedToken

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- corpora ---------------------------------------------------------------------------------
EN_WORDS = ("the of and to in is was it for on that with as by at from this be are or an have not "
            "which one all were when we there can been has more if will would about their what so "
            "model token reward group policy gradient sample prompt answer think reason because "
            "don't it's we're they've I'm you'll he'd THE Hello World GRPO").split()
ZH_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞"
CODE_LINES = [
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; i++) { sum += x[i] * w[i]; }",
    "if x != None and y >= 10:\n\tprint(f\"{x=} {y!r}\")",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }",
    "const ids = tokenizer.encode(\"hello\");  // 3 ids",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;",
    "x = [1, 2, 3]; y = {'a': 1, \"b\": 2}; z = (x, y)",
    "    if (err) {\n        return -1;\n    }\n",
]


def training_corpus(rng):
    """~3000 generated lines mixing English, Chinese, numbers and code (the tiny model's data)."""
    lines = []
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.45:
            lines.append(" ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(3, 15))) + rng.choice(".,!?\n"))
        elif kind < 0.75:
            lines.append("".join(rng.choice(ZH_CHARS[:120]) for _ in range(rng.randint(4, 20))) + rng.choice("。，！？"))
        elif kind < 0.9:
            lines.append(rng.choice(CODE_LINES))
        else:
            lines.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(1, 6))))
    return lines


def parity_corpus(rng):
    """The corpus every tokenizer is checked on: hand-written edge cases plus generated lines."""
    c = [
        "Hello world", "Hello, world! How are you?", " leading space", "trailing space ",
        "  two leading spaces", "multiple   spaces   between", "tab\tseparated\tvalues", "\t\tindented with tabs",
        "line one\nline two", "windows\r\nline ending", "trailing newlines\n\n\n", "\n\nleading newlines",
        "   \n  \t \n", " ", "", "a", "I'm sure it's what we've done, they'll say he'd've.", "DON'T SHOUT'S",
        "Numbers: 0 7 42 1234567 3.14159 -12 1,000,000 2026-12-02", "x1 y22 z333 abc123def",
        "你好，世界！", "中文分词测试：我们在学习强化学习。", "混合 mixed 文本 text 123 数字",
        "日本語のテキストです。", "한국어 텍스트", "Ünïcödé àccents café naïve résumé",
        "Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️", "math: ∑ ∫ ≤ ≥ ≠ ∞ √2 π", "\u00a0non-breaking\u00a0space\u3000ideographic",
        "zero\u200bwidth\u200djoiner", "arabic مرحبا بالعالم", "cyrillic Привет мир", "greek Γειά σου κόσμε",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
        "text<|im_end|>text", " <|im_end|> ", "<|im_end|><|im_end|><|im_start|>", "<|im_end",
        "<|endoftext|>", "before<|endoftext|>after", "<think>\nreasoning here\n</think>\nanswer",
        "<think></think>", "a<think>b</think>c", "x <mask> y", "x   <mask>   y", "<mask>", " <mask>",
        "foo_bar alone", "afoo_bar glued", "foo_bar_more", "(foo_bar)", "foo_bar",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<|buffer1|><|box_start|>",
        "ſ long s 'S and 'ſ", "K\u212a kelvin", "ﬁ ligature", "e\u0301 combining accent", "Å vs A\u030a",
        # found by tools/tokenizer_parity.py: PCRE2's \s holds U+180E, Unicode White_Space does not
        "'LL\u180e've", "x\u180e\u180e\u180e'd y", "\u180e \u180e",
        # single_word: a combining mark or a circled letter is a word character for Rust's \w
        "foo_bar\u302c", "foo_bar\u0332x", "\u24b6foo_bar", "foo_bar\u2460", "<think>foo_bar〬」",
        # normalizers (NFC / NFD variants): Hangul, reordering, singletons, exclusions, blocking
        "\u1100\u1161\u11a8 jamo \ud55c\u11a8", "a\u0316\u0301\u0300 reorder", "\u0344 \u0958 \u2126 \uf900 \u212b",
        "cafe\u0301 caf\u00e9 cafe\u0301x", "\u1e0b\u0323 \u1e0d\u0307 q\u0307\u0323", "\u01c5 \ufb01 compat stays",
        "\u0627\u0653 \u0d46\u0d3e \u0b47\u0b3e \u09c7\u09be", "\u0300\u0301 leading marks",
    ] + CODE_LINES
    # whitespace runs of every kind and length
    for ws in [" ", "  ", "\t", "\n", "\r\n", " \t ", "\n \n", "    ", "\u2003", "\u0085"]:
        c.append("word" + ws + "word" + ws)
        c.append(ws + "start")
    # generated mixtures
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(1, 6)):
            k = rng.random()
            if k < 0.35:
                parts.append(" ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(1, 6))))
            elif k < 0.6:
                parts.append("".join(rng.choice(ZH_CHARS) for _ in range(rng.randint(1, 8))))
            elif k < 0.7:
                parts.append(str(rng.randint(0, 10 ** 9)))
            elif k < 0.8:
                parts.append(rng.choice(["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", " <mask> "]))
            elif k < 0.9:
                parts.append(rng.choice([" ", "  ", "\t", "\n", "\n\n", " \n "]))
            else:
                parts.append(rng.choice(["😀", "🎉", "©", "→", "…", "—", "«»", "'s", "'LL"]))
        c.append(rng.choice(["", " ", "\n"]).join(parts))
    entries = [{"text": t} for t in c]
    # invalid UTF-8 (see the module docstring)
    for raw in [b"\xff", b"abc\xffdef", b"\xc3\x28 broken two-byte", b"\xe4\xbd truncated three-byte",
                b"\xf0\x9f\x98 truncated emoji", b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong",
                b"\x80\x80\x80 lone continuations", b"ok \xf4\x90\x80\x80 above U+10FFFF",
                "你好".encode()[:4] + b" cut"]:
        entries.append({"hex": raw.hex()})
    return entries


def entry_text(e):
    return e["text"] if "text" in e else bytes.fromhex(e["hex"]).decode("utf-8", "replace")


# ---- the tiny tokenizer and its variants ------------------------------------------------------
def train_tiny(rng):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, min_frequency=2, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_corpus(rng), trainer=trainer)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("</think>", special=False, normalized=False),
                    AddedToken("foo_bar", special=False, single_word=True, normalized=True),
                    AddedToken("你好", special=False, normalized=True)])
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, rstrip=True)])
    return json.loads(tok.to_str())


def split(pattern, behavior, invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
            "behavior": behavior, "invert": invert}


def bytelevel(add_prefix_space=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


def seq(*pts):
    return {"type": "Sequence", "pretokenizers": list(pts)}


def make_variants(tiny):
    """name -> tokenizer.json dict: the tiny model with other pre-tokenizers and formats."""
    v = {}

    def variant(name, pre=None, merges_as_strings=False, ignore_merges=None, post=None, normalizer=None,
                extra_added=()):
        j = copy.deepcopy(tiny)
        if normalizer is not None:
            j["normalizer"] = normalizer
        j["added_tokens"] += list(extra_added)
        if pre is not None:
            j["pre_tokenizer"] = pre
        if merges_as_strings:
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
        if ignore_merges is not None:
            j["model"]["ignore_merges"] = ignore_merges
        if post is not None:
            j["post_processor"] = post
        v[name] = j

    im_start_id = next(t["id"] for t in tiny["added_tokens"] if t["content"] == "<|im_start|>")
    variant("qwen2_split", seq(split(QWEN2_PATTERN, "Isolated"), bytelevel(use_regex=False)),
            merges_as_strings=True)
    variant("llama3_split", seq(split(LLAMA3_PATTERN, "Isolated"), bytelevel(use_regex=False)),
            ignore_merges=True,
            post={"type": "TemplateProcessing",
                  "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}}],
                  "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                  "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [im_start_id],
                                                      "tokens": ["<|im_start|>"]}}})
    # Qwen2/2.5/3 files: NFC, then the Qwen regex, then ByteLevel without its own regex; a normalized
    # added token whose text changes under NFC
    variant("qwen2_nfc", seq(split(QWEN2_PATTERN, "Isolated"), bytelevel(use_regex=False)),
            normalizer={"type": "NFC"},
            extra_added=[{"id": 517, "content": "cafe\u0301", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": False}])
    variant("nfd", normalizer={"type": "Sequence", "normalizers": [{"type": "NFD"}]})
    variant("prefix_space", bytelevel(add_prefix_space=True))
    variant("no_regex", bytelevel(use_regex=False))
    variant("removed", seq(split(r"\s+", "Removed"), bytelevel(use_regex=False)))
    variant("merged_prev", seq(split(r"[,.!?。，]", "MergedWithPrevious"), bytelevel()))
    variant("merged_next", seq(split(" ", "MergedWithNext", literal=True), bytelevel(use_regex=False)))
    variant("contiguous", seq(split(r"\p{N}", "Contiguous"), bytelevel()))
    variant("invert", seq(split(r"\p{L}+", "Isolated", invert=True), bytelevel(use_regex=False)))
    variant("invert_removed", seq(split(r"[^\s]+", "Removed", invert=True), bytelevel(use_regex=False)))
    return v


# ---- expected outputs -----------------------------------------------------------------------
def expected(tok, corpus, vocab_size, rng, all_single_ids, full=True):
    """Reference outputs; a variant (full=False) only differs in encoding, so it gets just that."""
    texts = [entry_text(e) for e in corpus]
    enc = [tok.encode(t).ids for t in texts]
    plain = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    out = {"encode": enc}
    if plain != enc:
        out["encode_plain"] = plain
    if not full:
        return out
    out.update({
           "decode": [tok.decode(ids, skip_special_tokens=False) for ids in enc],
           "decode_skip": [tok.decode(ids, skip_special_tokens=True) for ids in enc]})
    cases = []
    if all_single_ids:  # every id on its own: partial UTF-8 sequences decode to U+FFFD
        cases += [[i] for i in range(vocab_size)]
    for _ in range(40):  # random id runs, some out of range (dropped by tokenizers)
        cases.append([rng.randrange(vocab_size + (3 if rng.random() < 0.2 else 0)) for _ in range(rng.randint(1, 12))])
    for ids in enc[:40]:  # real encodings cut in the middle of a character
        if len(ids) > 2:
            cases.append(ids[1:-1])
    out["decode_cases"] = [{"ids": ids, "text": nul_safe(tok.decode(ids, skip_special_tokens=False)),
                            "text_skip": nul_safe(tok.decode(ids, skip_special_tokens=True))} for ids in cases]
    return out


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def expected_config(directory):
    """What transformers' AutoTokenizer reads from the directory: special ids and chat template."""
    from transformers import AutoTokenizer
    t = AutoTokenizer.from_pretrained(directory)
    ct = t.chat_template
    return {"bos_id": t.bos_token_id, "eos_id": t.eos_token_id, "pad_id": t.pad_token_id,
            "chat_template_len": len(ct.encode()) if ct else None,
            "chat_template_fnv1a64": fnv1a64(ct.encode()) if ct else None}


def nul_safe(text):
    """A decoded string, or {"hex": its UTF-8 bytes} when it holds U+0000 (cJSON strings stop there)."""
    return {"hex": text.encode().hex()} if "\x00" in text else text


def write_json(path, obj, compact_lists=True):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":") if compact_lists else None)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tokenizer"))
    args = ap.parse_args()
    rng = random.Random(1234)
    out = args.out
    os.makedirs(os.path.join(out, "tiny"), exist_ok=True)

    corpus = parity_corpus(rng)
    with open(os.path.join(out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=0)
        f.write("\n")

    tiny = train_tiny(rng)
    with open(os.path.join(out, "tiny", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tiny, f, ensure_ascii=False, indent=1)
    config = {"bos_token": "<|im_start|>",
              "eos_token": {"__type": "AddedToken", "content": "<|im_end|>", "lstrip": False, "normalized": False,
                            "rstrip": False, "single_word": False, "special": True},
              "pad_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast",
              "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}
    write_json(os.path.join(out, "tiny", "tokenizer_config.json"), config, compact_lists=False)

    tiny_tok = Tokenizer.from_str(json.dumps(tiny))
    exp = expected(tiny_tok, corpus, tiny_tok.get_vocab_size(), rng, all_single_ids=True)
    exp["config"] = expected_config(os.path.join(out, "tiny"))
    write_json(os.path.join(out, "expected_tiny.json"), exp)

    for name, j in make_variants(tiny).items():
        d = os.path.join(out, "variants", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
        tok = Tokenizer.from_str(json.dumps(j))
        write_json(os.path.join(out, f"expected_{name}.json"),
                   expected(tok, corpus, tok.get_vocab_size(), rng, all_single_ids=False, full=False))

    shared = os.path.join(os.environ.get("GRPO_SHARED_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared"), "data")
    for name in ["minimind2", "minimind3"]:
        path = os.path.join(shared, name, "tokenizer.json")
        if not os.path.exists(path):
            print(f"SKIP: {path} not found; expected_{name}.json not regenerated")
            continue
        tok = Tokenizer.from_file(path)
        exp = expected(tok, corpus, tok.get_vocab_size(), rng, all_single_ids=False)
        exp["config"] = expected_config(os.path.dirname(path))
        write_json(os.path.join(out, f"expected_{name}.json"), exp)
    print(f"wrote fixtures for {len(corpus)} corpus entries under {out}")


if __name__ == "__main__":
    main()
