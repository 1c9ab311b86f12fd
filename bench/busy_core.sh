#!/usr/bin/env bash
# busy_core.sh — the "busy machine" cliff (issue 14): the mean GRPO step time of a 2-thread run on
# an idle machine and with another process spinning on one core, for each OpenMP wait policy.
#
# usage: bench/busy_core.sh [GRPO] [STEPS]   (default build/grpo, 8 steps; needs 2+ cores)
# It makes the embedded default's model shape with `grpo init-model` in a temp dir and trains it
# on the arithmetic prompts (8 prompts x 16 completions of <= 40 tokens per step, beta 0.04, 2
# threads); step 1 is left out of the mean (warm-up). The busy load is a shell loop pinned to
# core 1 (taskset). Policies: nothing set (grpo's own choice: it re-executes itself with a short
# GOMP_SPINCOUNT, core/cli/main.c), GOMP_SPINCOUNT=300000 (libgomp's default, what grpo ran
# with before it chose), OMP_WAIT_POLICY=passive, or the environment settings listed in
# $POLICIES (e.g. POLICIES="GOMP_SPINCOUNT=1000"). ROUNDS=n (default 1) repeats the whole list,
# so that a shared machine's drift hits every policy alike. Prints one line per policy and round:
# idle and busy s/step and the ratio; then, per policy, the fastest idle and busy run over the
# rounds and their ratio (on a machine shared with other jobs, the fastest run is the one the
# others disturbed least).
# Since issue 30 the CPU backend runs on its own pool (kernels/cpu/cpu_pool.h) and grpo loads no
# OpenMP runtime: the policies above change nothing for such a build (they still do for an older
# one); its busy/idle ratio is the pool's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grpo=${1:-$root/build/grpo}
steps=${2:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"; [[ -n ${spinner:-} ]] && kill "$spinner" 2>/dev/null || true' EXIT
"$grpo" init-model "$work/model" >/dev/null
cat > "$work/run.ini" <<INI
[model]
path = $work/model
[data]
path = $root/examples/arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 16
max_completion_length = 40
[grpo]
beta = 0.04
[train]
steps = $steps
batch_prompts = 8
threads = 2
[log]
dir = $work/log
[checkpoint]
dir = $work/ckpt
every = 0
[reward.acc]
plugin = builtin.accuracy
INI
mean_step() { # mean step_time of steps 2.. from metrics.jsonl
    python3 -c "
import json,sys
t=[json.loads(l)['step_time'] for l in open('$work/log/metrics.jsonl')][1:]
print('%.4f' % (sum(t)/len(t)))"
}
run() { # policy-env load
    rm -rf "$work/log" "$work/ckpt"
    env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u GRPO_OMP_SET $1 \
        "$grpo" train "$work/run.ini" >/dev/null 2>&1
    mean_step
}
for round in $(seq "${ROUNDS:-1}"); do
policies=${POLICIES:-"GRPO_BENCH=default GOMP_SPINCOUNT=300000 OMP_WAIT_POLICY=passive"}
for policy in $policies; do
    idle=$(run "$policy")
    taskset -c 1 sh -c 'while :; do :; done' &
    spinner=$!
    busy=$(run "$policy")
    kill "$spinner"; wait "$spinner" 2>/dev/null || true; spinner=
    printf 'round %d  %-24s idle %7.4f s/step  busy %7.4f s/step  ratio %5.2fx\n' "$round" \
        "${policy#GRPO_BENCH=}" "$idle" "$busy" "$(python3 -c "print($busy/$idle)")"
    echo "${policy#GRPO_BENCH=} $idle $busy" >> "$work/all"
done
done
python3 - "$work/all" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    name, idle, busy = line.split()
    i, b = best.get(name, (float('inf'), float('inf')))
    best[name] = (min(i, float(idle)), min(b, float(busy)))
for name, (i, b) in best.items():
    print('fastest  %-24s idle %7.4f s/step  busy %7.4f s/step  ratio %5.2fx' % (name, i, b, b / i))
PY
