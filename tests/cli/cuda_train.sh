#!/usr/bin/env bash
# cuda_train: `grpo train` of the embedded default's model and data on backend = cuda, against the
# same two steps on cpu. Usage: cuda_train.sh GRPO SRC_DIR
# With GRPO_CUDA_EMULATION=1 (ctest cli_cuda_train_emu) the cuda backend is kernels/cuda run by
# the host emulation; without it (cli_cuda_train) a real GPU, and exit 77 (skipped) where the
# backend cannot open. A tiny random-init model (grpo init-model), 2 prompts x 4 completions of
# at most 16 tokens, beta 0.04 (so the reference model runs on cuda too). A random model earns no
# accuracy or format reward; the unigram-repetition penalty differs between its random
# completions, so the advantages, the loss and the gradient are not zero (checked: a zero
# grad_norm would make the comparison empty).
# Checked: (1) f32: step 1 samples from the same weights with the same seeds, so its reward is
# equal and its loss, entropy and grad_norm agree to 1e-4 relative (the backends sum in other
# orders: measured differences are ~1e-6); step 2 is finite. A sampled token can flip when a
# uniform draw falls within ~1e-6 of a cumulative-probability boundary (odds ~1e-3 a run).
# (2) model.dtype = bf16 (matmuls autocast to bf16): two finite steps.
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
cp -r "$SRC/examples/arith" arith
"$G" init-model init --seed 0 >/dev/null
write_run() { # NAME BACKEND DTYPE
    cat >"$1.ini" <<EOF
[model]
path = init
backend = $2
dtype = $3
[data]
path = arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 4
max_completion_length = 16
temperature = 1.0
[grpo]
beta = 0.04
[train]
steps = 2
batch_prompts = 2
seed = 1
threads = 1
[log]
dir = $1
every = 1
[checkpoint]
dir = $1/checkpoints
every = 0
[reward.accuracy]
plugin = builtin.accuracy
[reward.format]
plugin = builtin.format
weight = 0.5
[reward.repetition]
plugin = builtin.repetition
n = 1
scope = all
EOF
}
write_run cpu cpu f32
write_run cuda cuda f32
write_run cuda_bf16 cuda bf16
"$G" train cpu.ini >cpu.log 2>&1 || { cat cpu.log; exit 1; }
if ! "$G" train cuda.ini >cuda.log 2>&1; then
    if [ "${GRPO_CUDA_EMULATION:-0}" != 1 ] && grep -q "no CUDA device\|not built\|cannot load" cuda.log; then
        echo "SKIP: $(grep -m1 backend cuda.log)"; exit 77
    fi
    cat cuda.log; exit 1
fi
# metric KEY of line N of a metrics.jsonl
metric() { sed -n "${2}p" "$1/metrics.jsonl" | grep -o "\"$3\": [^,}]*" | sed 's/.*: //'; }
close() { # A B RTOL NAME
    awk -v a="$1" -v b="$2" -v r="$3" -v n="$4" 'BEGIN {
        d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); if (m < 1e-6) m = 1e-6;
        if (d > r * m) { printf "%s: cpu %s, cuda %s (rtol %s)\n", n, a, b, r; exit 1 } }'
}
fail=0
[ "$(metric cpu 1 reward)" = "$(metric cuda 1 reward)" ] ||
    { echo "step 1 reward: cpu $(metric cpu 1 reward), cuda $(metric cuda 1 reward)"; fail=1; }
for k in loss entropy grad_norm kl; do
    a=$(metric cpu 1 $k); b=$(metric cuda 1 $k)
    [ -z "$a" ] && continue
    close "$a" "$b" 1e-4 "step 1 $k" || fail=1
done
finite() { # DIR
    for n in 1 2; do
        for k in loss grad_norm; do
            v=$(metric "$1" $n $k)
            case "$v" in ''|*nan*|*inf*|*NaN*) echo "$1 step $n $k: '$v'"; return 1;; esac
        done
    done
}
awk -v g="$(metric cpu 1 grad_norm)" 'BEGIN { exit !(g > 1e-8) }' ||
    { echo "step 1 grad_norm is $(metric cpu 1 grad_norm): the comparison would be empty"; fail=1; }
finite cuda || fail=1
"$G" train cuda_bf16.ini >bf16.log 2>&1 || { cat bf16.log; fail=1; }
[ -f cuda_bf16/metrics.jsonl ] && { finite cuda_bf16 || fail=1; }
[ $fail = 0 ] || { echo "cuda_train: FAILED"; exit 1; }
echo "cuda_train: step 1 on cuda matches cpu (reward $(metric cuda 1 reward); loss cpu" \
     "$(metric cpu 1 loss), cuda $(metric cuda 1 loss); grad_norm cpu $(metric cpu 1 grad_norm)," \
     "cuda $(metric cuda 1 grad_norm)); bf16: loss $(metric cuda_bf16 1 loss)," \
     "$(metric cuda_bf16 2 loss), grad_norm $(metric cuda_bf16 1 grad_norm)"
