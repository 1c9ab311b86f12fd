#!/usr/bin/env bash
# logprobs_batch.sh GRPO — `grpo logprobs` prints the same bits whatever the batch (issue
# "exactly on-policy by construction"): nine sequences of different lengths (so every batch
# but the first pads its rows) scored with --batch 1, --batch 7 and --batch 4 on 2 threads
# must print byte-identical lines (the log-probs are printed to 9 significant digits: equal
# bits, equal text; different bits, different text for any difference over ~1e-9 relative).
set -uo pipefail
grpo=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$grpo" init-model model --seed 11 --hidden 256 --intermediate 704 >/dev/null || { echo "FAIL: init-model"; exit 1; }
awk 'BEGIN { srand(5); for (i = 0; i < 9; i++) { n = 3 + (i * 17) % 61; s = "{\"ids\": [";
       for (j = 0; j < n; j++) s = s (j ? ", " : "") (1 + int(rand() * 250)); print s "]}" } }' \
    > in.jsonl
fail=0
for run in "1 1" "7 1" "4 2"; do
    set -- $run
    "$grpo" logprobs --model model --input in.jsonl --output "b$1.jsonl" --batch "$1" \
        --threads "$2" 2>err.txt || { echo "FAIL: --batch $1: $(cat err.txt)"; fail=1; }
done
lines=$(wc -l < b1.jsonl)
[[ $lines == 9 ]] || { echo "FAIL: --batch 1 printed $lines lines, expected 9"; fail=1; }
grep -q '[1-9]' b1.jsonl || { echo "FAIL: no nonzero log-prob printed"; fail=1; }
for b in 7 4; do
    cmp -s b1.jsonl "b$b.jsonl" ||
        { echo "FAIL: --batch $b differs from --batch 1:"; diff b1.jsonl "b$b.jsonl" | head -4;
          fail=1; }
done
[[ $fail == 0 ]] && echo "ok   grpo logprobs: --batch 1, 7 and 4 (2 threads) print the same bits"
exit $fail
