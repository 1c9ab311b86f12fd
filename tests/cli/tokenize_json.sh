#!/usr/bin/env bash
# tokenize_json.sh GRPO SRC — `grpo tokenize --json` on multi-line texts gives the ids Hugging Face
# `tokenizers` gives (fixtures by tools/make_tokenize_json_fixture.py): the committed tiny
# tokenizer always, the shared MiniMind ones when ../shared/data (or $GRPO_SHARED_DIR) has them.
set -uo pipefail
grpo=$1 src=$2
fix=$src/tests/fixtures/tokenizer
shared=${GRPO_SHARED_DIR:-$src/../shared}/data
failed=0
for name in tiny minimind2 minimind3; do
    dir=$fix/tiny
    [[ $name != tiny ]] && dir=$shared/$name
    if [[ ! -f $dir/tokenizer.json ]]; then
        echo "SKIP $name: $dir/tokenizer.json not found (the shared tokenizers are not here)"
        continue
    fi
    if out=$("$grpo" tokenize --tokenizer "$dir" --json < "$fix/json_texts.jsonl") &&
        diff <(printf '%s\n' "$out") "$fix/json_expected_$name.txt"; then
        echo "ok   $name: $(wc -l < "$fix/json_texts.jsonl") texts"
    else
        echo "FAIL $name: ids differ from tokenizers' (above)"
        failed=1
    fi
done
# a line that is not a JSON string is refused naming the line
if msg=$(printf '"ok"\nnot json\n' | "$grpo" tokenize --tokenizer "$fix/tiny" --json 2>&1 >/dev/null); then
    echo "FAIL: a line that is not a JSON string was accepted"; failed=1
elif [[ $msg != *"stdin:2: expected a JSON string"* ]]; then
    echo "FAIL: unexpected message: $msg"; failed=1
else
    echo "ok   stdin:2 refused: $msg"
fi
exit $failed
