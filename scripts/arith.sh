#!/usr/bin/env bash
# scripts/arith.sh — the embedded default end to end on CPU: a tiny random-init model and
# byte-level tokenizer made by grpo itself, an SFT warm start on examples/arith/sft.jsonl, GRPO on
# examples/arith/train.jsonl with the accuracy + format rewards, and held-out evaluation
# (examples/arith/eval.jsonl, 300 prompts, greedy and temperature 1) before and after GRPO.
# Everything goes to runs/arith/. SEED=N scripts/arith.sh picks the init-model seed (default 0).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/grpo ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build -j2
fi
G=build/grpo
rm -rf runs/arith
start=$(date +%s)
$G init-model runs/arith/init --seed "${SEED:-0}"
$G sft examples/arith_sft.ini --out runs/arith/sft
echo "== held-out before GRPO (after SFT)"
$G eval examples/arith.ini --model runs/arith/sft | tee runs/arith/eval_before.json
$G eval examples/arith.ini --model runs/arith/sft --temperature 1.0 | tee runs/arith/eval_before_t1.json
$G train examples/arith.ini
echo "== held-out after GRPO"
$G eval examples/arith.ini | tee runs/arith/eval_after.json
$G eval examples/arith.ini --temperature 1.0 | tee runs/arith/eval_after_t1.json
echo "== total $(( $(date +%s) - start )) s; metrics in runs/arith/train/metrics.jsonl" \
     "(plot: $G plot runs/arith/train/metrics.jsonl -o runs/arith/reward.svg)"
