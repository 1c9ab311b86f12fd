#!/usr/bin/env bash
# reward_overlap.sh GRPO SRC MISBEHAVE — rewards scored while the batch decodes (issue 33, item 1;
# core/train/reward_pool.c) give the bytes of scoring after the batch:
#   1. the same fixed-seed run (a short SFT'd policy, so rows end at different lengths) with two
#      slow test rewards from tests/packs/misbehave, mb.hash (rows independent, thread-safe) and
#      mb.rank (a group's rows together: it ranks lengths within the group; per instance), is run
#      after the batch (their _serial twins, not thread-safe), with workers = 1, workers = 4, and
#      isolated with workers = 2; metrics.jsonl (less timings and perf/) and completions.jsonl
#      must be byte-identical across all four, and with mb.hash forced to groups by the run
#      file's rows_independent = false; mb.rank forced row by row (rows_independent = true) must
#      change (every row ranks 0: the override is obeyed);
#   2. the pooled runs really overlapped decoding: time/rewards_scored_while_decoding (the share
#      of the pooled calls begun before the batch's last row ended) is > 0 in some step, and
#      absent from the after-the-batch run, which has no pooled reward.
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2"); MB=$(realpath "$3")
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
"$G" init-model init --seed 3 >/dev/null
cat >sft.ini <<EOF
[model]
path = init
[data]
path = $SRC/examples/arith/sft.jsonl
max_prompt_length = 32
[optim]
lr = 1e-3
[train]
steps = 20
batch_prompts = 8
seed = 1
threads = 2
[log]
dir = sftlog
EOF
"$G" sft sft.ini --out sft >/dev/null 2>&1 || { echo "FAIL: sft"; exit 1; }

# run NAME HASH_SECTION_EXTRA RANK_SECTION_EXTRA HASH_PLUGIN RANK_PLUGIN
run() {
    cat >"$1.ini" <<EOF
[model]
path = sft
[data]
path = $SRC/examples/arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 4
max_completion_length = 24
temperature = 1.0
[optim]
lr = 1e-4
[train]
steps = 3
batch_prompts = 4
seed = 7
threads = 2
[log]
dir = $1
completions_every = 1
[reward.hash]
plugin = $4
sleep_ms = 5
$2
[reward.rank]
plugin = $5
weight = 0.5
sleep_ms = 5
$3
EOF
    "$G" train "$1.ini" --plugin-path "$MB" >"$1.log" 2>&1 ||
        { cat "$1.log"; echo "FAIL: train $1"; exit 1; }
    python3 - "$1/metrics.jsonl" >"$1.metrics" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    d = {k: v for k, v in d.items()
         if not (k.startswith(("time", "perf", "throughput")) or k == "step_time"
                 or "per_sec" in k or "rss" in k or "wall" in k)}
    print(json.dumps(d, sort_keys=True))
PY
}

run after "" "" mb.hash_serial mb.rank_serial
run w1 "workers = 1" "workers = 1" mb.hash mb.rank
run w4 "workers = 4" "workers = 4" mb.hash mb.rank
run iso "isolate = true
workers = 2" "isolate = true
workers = 2" mb.hash mb.rank
# the run file's rows_independent overrides the manifest's: mb.hash by groups is the same; mb.rank
# row by row sees no other member, so it ranks every row 0 (only its hash / 1000 is left)
run groups "rows_independent = false
workers = 3" "workers = 2" mb.hash mb.rank
run rows "workers = 2" "rows_independent = true
workers = 2" mb.hash mb.rank

fail=0
for r in w1 w4 iso groups; do
    cmp -s after.metrics "$r.metrics" ||
        { echo "FAIL: metrics of $r differ from scoring after the batch"
          diff after.metrics "$r.metrics" | head -5; fail=1; }
    cmp -s after/completions.jsonl "$r/completions.jsonl" ||
        { echo "FAIL: completions of $r differ from scoring after the batch"; fail=1; }
done
# the scores are really there (not NaN everywhere, and the group reward saw whole groups: some
# member outranks another, so its mean is above the hash's share)
python3 - after/metrics.jsonl <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if not (r["rewards/hash/nan_frac"] == 0 and r["rewards/rank/nan_frac"] == 0):
        print("FAIL: NaN scores in", r); sys.exit(1)
if not any(r["rewards/rank/mean"] > 0.5 for r in rows):
    print("FAIL: rank never saw a group with different lengths:",
          [r["rewards/rank/mean"] for r in rows])
    sys.exit(1)
PY
python3 - rows/metrics.jsonl <<'PY' || fail=1
import json, sys
m = [json.loads(l)["rewards/rank/mean"] for l in open(sys.argv[1])]
if max(m) >= 0.01:
    print("FAIL: rows_independent = true did not split mb.rank's groups: means %r" % m)
    sys.exit(1)
PY
grep -q 'time/rewards_scored_while_decoding' after/metrics.jsonl &&
    { echo "FAIL: the after-the-batch run reports pooled calls"; fail=1; }
for r in w1 w4 iso; do
    python3 - "$r/metrics.jsonl" "$r" <<'PY' || fail=1
import json, sys
v = [json.loads(l).get("time/rewards_scored_while_decoding") for l in open(sys.argv[1])]
if None in v or max(v) <= 0:
    print("FAIL: %s: no call was scored while rows still decoded: %r" % (sys.argv[2], v))
    sys.exit(1)
print("%s: share of calls scored while decoding per step: %r" % (sys.argv[2], v))
PY
done
[ "$fail" = 0 ] && echo "reward_overlap: 5 orders byte-identical; scoring overlapped decoding"
exit "$fail"
