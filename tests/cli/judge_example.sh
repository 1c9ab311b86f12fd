#!/usr/bin/env bash
# judge_example.sh GRPO SRC — examples/judge.ini's judge against the example's own server
# (examples/judge-server/judge_server.py, started here on a free port of 127.0.0.1, requiring
# the key the run file names through api_key_env): `grpo reward score` on examples/samples.jsonl
# gives the grades the judge's rule says (10/10 right answer, 2/10 wrong answer, 0 without an
# <answer> tag; the last tag counts), mapped onto [0, 1].
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2")
work=$(mktemp -d); spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"' EXIT
export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1; unset http_proxy HTTP_PROXY all_proxy ALL_PROXY
export JUDGE_KEY="judge-example-$RANDOM"
python3 "$SRC/examples/judge-server/judge_server.py" --port 0 --api-key-env JUDGE_KEY \
    >"$work/server.txt" &
spid=$!
for _ in $(seq 100); do [ -s "$work/server.txt" ] && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/server.txt") ||
    { echo "FAIL: the judge did not start"; exit 1; }
out=$("$G" reward score --config "$SRC/examples/judge.ini" --input "$SRC/examples/samples.jsonl" \
      --set "reward.judge.url=$url" 2>"$work/err") || { cat "$work/err"; exit 1; }
echo "$out"
got=$(echo "$out" | python3 -c '
import json, sys
print(" ".join("%.2f" % json.loads(l)["rewards"]["judge"] for l in sys.stdin))')
# samples.jsonl: answers 7 (gold 7), 8 (gold 7), 7, no tag, two tags the last 7
[ "$got" = "1.00 0.20 1.00 0.00 1.00" ] ||
    { echo "FAIL: judge rewards $got"; cat "$work/err"; exit 1; }
if grep -qF "$JUDGE_KEY" "$work/err"; then echo "FAIL: the key is in the output"; exit 1; fi
echo "ok   examples/judge.ini's judge scores samples.jsonl through its server"
