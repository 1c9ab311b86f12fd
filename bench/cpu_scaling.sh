#!/usr/bin/env bash
# bench/cpu_scaling.sh — thread scaling of one GRPO step on a many-core machine (issue 30): the
# MiniMind2-small benchmark model (bench/bench_grpo_step.ini, 64 new tokens, 3 steps) at 1, 2, 4,
# 8 and 16 threads, then 2 threads pinned to 2 cores (taskset) alone, next to a process spinning
# on one of them, and next to a second 2-thread run, and 1 thread pinned to one core. Prints each
# run's step times and its last step's CPU seconds per phase; GRPO_CPU_POOL_STATS=1 adds the
# pool's fork/join counts of the 2-thread run to OUT/pool_stats.txt.
# Usage: bench/cpu_scaling.sh GRPO_BINARY MODEL_DIR OUT_DIR
#   (MODEL_DIR: python3 bench/bench_grpo_step_torch.py --make DIR; cores 2 and 3 must exist)
set -u
b=$(realpath "${1:?usage: bench/cpu_scaling.sh GRPO_BINARY MODEL_DIR OUT_DIR}")
model=$(realpath "${2:?model dir}")
out=$(mkdir -p "${3:?out dir}" && realpath "$3")
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
ini() { # NAME THREADS: the benchmark's run file with this model, 64 new tokens, 3 steps
    sed -e "s#path = ../build/bench_grpo_step/model#path = $model#" \
        -e "s#path = bench_grpo_step_prompts.jsonl#path = $root/bench/bench_grpo_step_prompts.jsonl#" \
        -e "s/^steps = .*/steps = 3/" -e "s/^threads = .*/threads = $2/" \
        -e "s/^max_completion_length = .*/max_completion_length = 64/" \
        -e "s#^dir = build/bench_grpo_step/runs#dir = $tmp/runs_$1#" \
        "$root/bench/bench_grpo_step.ini" >"$tmp/$1.ini"
}
show() { # NAME: its step times and its last step's CPU seconds per phase
    python3 - "$tmp/runs_$1/metrics.jsonl" "$1" <<'PY' | tee -a "$out/scaling.txt"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{sys.argv[2]}: step_time " + " ".join(f"{r['step_time']:.2f}" for r in rows)
      + " | cpu phases (last) " + " ".join(f"{k[9:]} {v:.2f}" for k, v in rows[-1].items()
                                           if k.startswith("time/cpu/")))
PY
}
run() { "$@" >/dev/null 2>&1 || echo "failed: $*"; }
for th in 1 2 4 8 16; do
    ini "t$th" "$th"
    run "$b" train "$tmp/t$th.ini"
    show "t$th"
done
ini stats 2
GRPO_CPU_POOL_STATS=1 "$b" train "$tmp/stats.ini" >/dev/null 2>"$out/pool_stats.txt"
for c in alone spin pair_1 pair_2 one; do ini "$c" 2; done
ini one 1
run taskset -c 2,3 "$b" train "$tmp/alone.ini"
show alone
taskset -c 3 sh -c 'while :; do :; done' & spin=$!
run taskset -c 2,3 "$b" train "$tmp/spin.ini"
kill "$spin"
show spin
taskset -c 2,3 "$b" train "$tmp/pair_2.ini" >/dev/null 2>&1 & other=$!
run taskset -c 2,3 "$b" train "$tmp/pair_1.ini"
wait "$other"
show pair_1
run taskset -c 2 "$b" train "$tmp/one.ini"
show one
rm -rf "$tmp"
