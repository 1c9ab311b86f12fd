#!/usr/bin/env bash
# http_reward.sh GRPO SRC — `grpo train` with builtin.http rewards against the local test server
# (tests/http_server/server.py on 127.0.0.1, requiring an API key):
#   1. an exec-mode and a judge-mode reward score every completion (the server saw the key, and
#      metrics.jsonl has their means, no NaN);
#   2. a reward whose endpoint is dead (nothing listens) costs NaN, not the run: it finishes in
#      bounded time with rewards/dead/nan_frac = 1 and one circuit-breaker warning;
#   3. the key's value is nowhere: not in the saved log.dir/config.ini, metrics, completions,
#      checkpoints or grpo's output (only the variable's name is).
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2")
work=$(mktemp -d); spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1; unset http_proxy HTTP_PROXY all_proxy ALL_PROXY
key="sk-cli-$RANDOM$RANDOM-secret"
export GRPO_HTTP_TEST_KEY=$key
python3 "$SRC/tests/http_server/server.py" --key "$key" --log server.log >port.txt &
spid=$!
for _ in $(seq 100); do [ -s port.txt ] && break; sleep 0.1; done
port=$(head -1 port.txt); [ -n "$port" ] || { echo "FAIL: the test server did not start"; exit 1; }
"$G" init-model init --seed 0 >/dev/null
cat >run.ini <<EOF2
[model]
path = init
[data]
path = $SRC/examples/arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 4
max_completion_length = 8
[train]
steps = 2
batch_prompts = 2
seed = 1
threads = 1
[log]
dir = out
completions_every = 1
[checkpoint]
dir = out/ckpt
every = 1
[reward.exec]
plugin = builtin.http
url = http://127.0.0.1:$port/score
api_key_env = GRPO_HTTP_TEST_KEY
timeout = 10
[reward.judge]
plugin = builtin.http
mode = judge
url = http://127.0.0.1:$port/v1/chat/completions
api_key_env = GRPO_HTTP_TEST_KEY
model = toy-judge
template = Question: {prompt} (answer {answer})
template = C=5
[reward.dead]
plugin = builtin.http
url = http://127.0.0.1:1/score
retries = 1
backoff = 0.01
breaker_failures = 1
EOF2
start=$(date +%s)
"$G" train run.ini >train.log 2>&1 || { cat train.log; echo "FAIL: train failed"; exit 1; }
took=$(( $(date +%s) - start ))
fail=0
[ "$took" -lt 120 ] || { echo "FAIL: the run took $took s"; fail=1; }
n=$(wc -l <server.log)
[ "$n" -ge 2 ] || { echo "FAIL: the server got $n requests"; fail=1; }
grep -q '"auth": false' server.log && { echo "FAIL: a request lacked the key"; fail=1; }
python3 - out/metrics.jsonl <<'PY' || fail=1
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-1]
def need(k, ok):
    if k not in last or not ok(last[k]):
        print("FAIL: %s = %r" % (k, last.get(k))); sys.exit(1)
need("rewards/exec/mean", lambda v: v is not None and v >= 0)   # completion lengths
need("rewards/judge/mean", lambda v: v is not None and abs(v - 0.5) < 1e-6)  # C=5 on [0, 10]
need("rewards/dead/nan_frac", lambda v: v == 1)
PY
[ "$(grep -c 'circuit breaker open' train.log)" = 1 ] ||
    { echo "FAIL: expected one circuit-breaker warning"; grep builtin.http train.log; fail=1; }
grep -q 'api_key_env = GRPO_HTTP_TEST_KEY' out/config.ini ||
    { echo "FAIL: config.ini lacks api_key_env"; fail=1; }
if grep -rlF "$key" out train.log; then
    echo "FAIL: the API key leaked into the files above"; fail=1
fi
[ $fail = 0 ] || { cat train.log; exit 1; }
echo "ok   builtin.http in grpo train: exec and judge scored, a dead endpoint NaN, the key nowhere"
