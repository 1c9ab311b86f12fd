#!/usr/bin/env python3
"""make_tokenize_json_fixture.py — what Hugging Face `tokenizers` gives for multi-line texts, for
the `grpo tokenize --json` test (tests/tokenize_json.cmake).

Writes tests/fixtures/tokenizer/json_texts.jsonl (one JSON string per line: the input of
`grpo tokenize --json`) and, per tokenizer, json_expected_<name>.txt (one JSON array of ids per
line, add_special_tokens=True, formatted as grpo prints them). Tokenizers: tests/fixtures/
tokenizer/tiny (committed) and, when present, the shared MiniMind ones ($GRPO_SHARED_DIR/data or
../shared/data beside the project); only ids are written, never the tokenizer files.

Usage: pip install tokenizers; python3 tools/make_tokenize_json_fixture.py
"""
import json
import os

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
SHARED = os.environ.get("GRPO_SHARED_DIR", os.path.join(ROOT, "..", "shared"))

TEXTS = [
    "a\nb",
    "line one\nline two\n",
    "tab\tseparated\tvalues",
    "windows\r\nline\r\nends",
    "\n\n\nleading newlines",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>\n<answer>42</answer>",
    "trailing spaces   \n  indented",
    "quote \" and backslash \\ and unicode \u00e9\u4f60\u597d",
    "",
]


def main():
    with open(os.path.join(OUT, "json_texts.jsonl"), "w") as f:
        for t in TEXTS:
            f.write(json.dumps(t) + "\n")
    toks = {"tiny": os.path.join(OUT, "tiny", "tokenizer.json")}
    for name in ("minimind2", "minimind3"):
        p = os.path.join(SHARED, "data", name, "tokenizer.json")
        if os.path.exists(p):
            toks[name] = p
    for name, path in toks.items():
        tok = Tokenizer.from_file(path)
        with open(os.path.join(OUT, f"json_expected_{name}.txt"), "w") as f:
            for t in TEXTS:
                ids = tok.encode(t, add_special_tokens=True).ids
                f.write("[" + ",".join(str(i) for i in ids) + "]\n")


if __name__ == "__main__":
    main()
