#!/usr/bin/env bash
# scripts/quickstart.sh — the README's first command: install what is missing, build, and run
# what grpo can do today on the embedded example (list the plugins, score example completions
# with the MiniMind format + tags rewards).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
echo "== grpo plugins list"
build/grpo plugins list
echo "== grpo reward score --config examples/minimind_format.ini --input examples/samples.jsonl"
build/grpo reward score --config examples/minimind_format.ini --input examples/samples.jsonl
