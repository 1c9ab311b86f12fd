#!/usr/bin/env bash
# tokenize_json.sh GRPO SRC [--shared] — `grpo tokenize --json` on multi-line texts gives the ids
# Hugging Face `tokenizers` gives (fixtures by tools/make_tokenize_json_fixture.py): the committed
# tiny tokenizer (and a refused line) without --shared (ctest cli_tokenize_json); with --shared
# (cli_tokenize_json_shared) the MiniMind ones of ../shared/data (or $GRPO_SHARED_DIR/data):
# skipped where they are not, a failure under CI (tests/cli/skip.sh).
set -uo pipefail
grpo=$1 src=$2 mode=${3:-}
. "$src/tests/cli/skip.sh"
fix=$src/tests/fixtures/tokenizer
shared=${GRPO_SHARED_DIR:-$src/../shared}/data
names=(tiny)
if [[ $mode == --shared ]]; then
    names=(minimind2 minimind3)
    for name in "${names[@]}"; do
        [[ -f $shared/$name/tokenizer.json ]] ||
            skip_or_fail "$shared/$name/tokenizer.json not found (the shared MiniMind tokenizers)"
    done
fi
failed=0
for name in "${names[@]}"; do
    dir=$fix/tiny
    [[ $name != tiny ]] && dir=$shared/$name
    if out=$("$grpo" tokenize --tokenizer "$dir" --json < "$fix/json_texts.jsonl") &&
        diff <(printf '%s\n' "$out") "$fix/json_expected_$name.txt"; then
        echo "ok   $name: $(wc -l < "$fix/json_texts.jsonl") texts"
    else
        echo "FAIL $name: ids differ from tokenizers' (above)"
        failed=1
    fi
done
[[ $mode == --shared ]] && exit $failed
# a line that is not a JSON string is refused naming the line
if msg=$(printf '"ok"\nnot json\n' | "$grpo" tokenize --tokenizer "$fix/tiny" --json 2>&1 >/dev/null); then
    echo "FAIL: a line that is not a JSON string was accepted"; failed=1
elif [[ $msg != *"stdin:2: expected a JSON string"* ]]; then
    echo "FAIL: unexpected message: $msg"; failed=1
else
    echo "ok   stdin:2 refused: $msg"
fi
exit $failed
