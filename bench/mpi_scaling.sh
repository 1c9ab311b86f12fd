#!/usr/bin/env bash
# mpi_scaling.sh — data-parallel `grpo train` (issue 21): steps/s with 1 and 2 ranks of 1 thread
# each, the same global batch, and the share of rank 0's step time spent in MPI collectives
# (the time/comm metric: the gradient all-reduce, the reward gather, the count and loss-sum
# reductions, waits for the slower rank included).
#
# usage: bench/mpi_scaling.sh [arith|minimind] [STEPS] [GRPO]   (default arith, 8 steps, build/grpo)
#   arith     the embedded default's run (examples/arith.ini: 8 prompts x 16 completions of <= 40
#             tokens per step) on the default `grpo init-model` (0.8 M parameters)
#   minimind  the MiniMind2-small body (hidden 512, 8 layers, 8 heads, 2 KV heads, intermediate
#             1408; grpo's byte-level vocabulary, not MiniMind's 6400) with bench_grpo_step.ini's
#             step (2 prompts x 8 completions, 128 tokens max, beta 0.02, grpo loss)
# Step 1 is left out (warm-up). Prints, per rank count: median s/step, steps/s, speed-up over one
# rank and time/comm as a share of the step. The two ranks share the machine's cores (run it on
# an otherwise idle machine with >= 2 cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shape=${1:-arith}
steps=${2:-8}
grpo=${3:-$root/build/grpo}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc --all)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
case $shape in
arith)
    "$grpo" init-model "$work/model" >/dev/null
    run=$root/examples/arith.ini
    sets=(--set data.eval_path= --set log.completions_every=0) ;;
minimind)
    "$grpo" init-model "$work/model" --hidden 512 --layers 8 --heads 8 --kv-heads 2 \
        --intermediate 1408 >/dev/null
    run=$root/bench/bench_grpo_step.ini
    sets=() ;;
*) echo "usage: $0 [arith|minimind] [STEPS] [GRPO]" >&2; exit 2 ;;
esac
sets+=(--model "$work/model" --set train.steps="$steps" --set train.threads=1
       --set checkpoint.every=0 --set checkpoint.keep=1)
echo "shape $shape, $steps steps, $(lscpu | sed -n 's/^Model name: *//p'), $cores cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
base=
for np in 1 2; do
    dir=$work/np$np
    if [[ $np == 1 ]]; then
        "$grpo" train "$run" "${sets[@]}" --set log.dir="$dir" --set checkpoint.dir="$dir/ck" \
            > "$work/np$np.log" 2>&1
    else
        mpirun -np "$np" --oversubscribe "$grpo" train "$run" "${sets[@]}" --set log.dir="$dir" \
            --set checkpoint.dir="$dir/ck" > "$work/np$np.log" 2>&1
    fi || { cat "$work/np$np.log"; exit 1; }
    read -r med comm < <(python3 - "$dir/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
t = [r["step_time"] for r in rows]
c = [r.get("time/comm", 0.0) for r in rows]
print(statistics.median(t), sum(c) / sum(t))
PY
)
    base=${base:-$med}
    awk -v np="$np" -v m="$med" -v c="$comm" -v b="$base" 'BEGIN {
        printf "ranks %d: %.3f s/step, %.2f steps/s, speed-up %.2fx, comm %.1f%% of the step\n",
               np, m, 1 / m, b / m, 100 * c }'
done
