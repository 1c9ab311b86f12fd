#!/usr/bin/env bash
# scripts/quickstart.sh — the README's first command: install what is missing (Debian 12), build,
# and run the main job on the embedded default: a tiny model and tokenizer made by grpo itself,
# an SFT warm start, GRPO on the arithmetic prompts, held-out evaluation before and after, and a
# reward chart (runs/arith/reward.svg). See examples/arith/README.md for what it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
scripts/arith.sh
build/grpo plot runs/arith/train/metrics.jsonl -o runs/arith/reward.svg \
    --metrics reward,rewards/accuracy/mean,rewards/format/mean,completions/mean_length
echo "== chart: runs/arith/reward.svg"
