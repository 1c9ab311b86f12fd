#!/usr/bin/env python3
"""check_model_card.py — loads the README.md grpo writes into a model directory with
huggingface_hub's own parser and checks what the Hub reads from it.

Usage: pip install huggingface_hub; python3 tools/check_model_card.py CHECKPOINT_DIR/README.md
"""
import sys

from huggingface_hub import ModelCard


def main():
    card = ModelCard.load(sys.argv[1])
    data = card.data.to_dict()
    assert data.get("library_name") == "grpo", data
    assert "grpo" in data.get("tags", []), data
    assert data.get("pipeline_tag") == "text-generation", data
    assert data.get("base_model"), data
    assert "## Rewards" in card.text or "Supervised" in card.text, card.text[:200]
    assert "```ini" in card.text, "no resolved run file"
    print("ok", sys.argv[1], data)


if __name__ == "__main__":
    main()
