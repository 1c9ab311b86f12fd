#!/usr/bin/env bash
# cuda_train: `grpo train` of the embedded default's model and data on backend = cuda, against the
# same two steps on cpu. Usage: cuda_train.sh GRPO SRC_DIR
# With GRPO_CUDA_EMULATION=1 (ctest cli_cuda_train_emu) the cuda backend is kernels/cuda run by
# the host emulation; without it (cli_cuda_train) a real GPU, and exit 77 (skipped) where the
# backend cannot open (the emulated one: skipped outside CI, a failure under CI=true). A tiny
# random-init model (grpo init-model), 2 prompts x 4 completions of at most 16 tokens, beta
# 0.04 (so the reference model runs on cuda too). A random model earns no accuracy or format
# reward; the unigram-repetition penalty differs between its random
# completions, so the advantages, the loss and the gradient are not zero (checked: a zero
# grad_norm would make the comparison empty).
# Checked: (1) f32, both steps: step 1 samples from the same weights with the same seeds, and
# step 2 from weights one AdamW step apart by fp32 rounding, so each step's reward is equal and
# its loss, entropy, grad_norm and kl agree to 1e-4 relative (the backends sum in other orders:
# measured differences ~1e-6), with an absolute floor of 1e-9 for loss and kl only: at step 2
# they are O(1e-7) (kl ~ mean r^2/2 of the log-ratio r ~ 4e-4 to the reference, loss ~ beta kl),
# and fp32 rounding of log-probs of size ~5 (~5e-7) moves them by |r| * 5e-7 ~ 2e-10. A sampled
# token can flip when a uniform draw falls within ~1e-6 of a cumulative-probability boundary
# (odds ~1e-3 a run).
# (2) model.dtype = bf16 (matmuls autocast to bf16, the rollout from a bf16 copy) against the f32
# cpu run, both steps. bf16 keeps 8 significant bits: unit roundoff u = 2^-8 = 3.9e-3 per
# rounded operand, so a product of two rounded operands is off by <= 2u = 7.8e-3 relative and a
# sum of such products (rounding errors of either sign) by no more relative to the sum of their
# magnitudes. Bounds: reward equal (the same tokens: with this seed no draw falls within the
# ~1e-3 by which bf16 moves a probability; the odds that one does are ~0.1 a run, so a change of
# the numerics may flip a token: the reward line then says so); entropy and grad_norm within
# 2u relative (measured 2e-6 and 1.4e-3, 1.8e-3); loss within 2u * advantage/abs_mean absolute
# (the importance weights exp(logp - logp_bf16) differ from 1 by the bf16 log-prob error,
# <= 2u: measured max 2.9e-3) + 2u relative; kl within (2u)^2 = 6.1e-5 absolute (second order in
# the rounding). And the bf16 path ran: the sampling/importance_sampling_ratio metrics are
# logged and grad_norm differs from the f32 cuda run's by more than 1e-5 relative.
# (3) packed micro-batches on cuda: prompts of 4 to 31 characters (arith's are all 6, and a random
# model's completions all run to the limit: no padding to pack away), padded (cuda_rag) and packed
# (train.max_tokens_per_microbatch = 100: rows of at most 32 + 16 tokens, so each micro-batch's 8
# rows go into several packs of 2 or more). Both train two steps; train/padding_frac is 0 at each
# step of the packed run and not 0 in the padded one; and the packed step equals the padded one:
# the same reward (the rollout does not pack) and loss, entropy, grad_norm and kl within (1)'s
# bounds (packing changes how rows are grouped, not what is summed: the forward differs by fp32
# rounding only, tests/test_packed_training.c). The packed run sets train.shared_prefix = false.
# (4) packs that share their prompts (train.shared_prefix on, the default: parent and child
# segments, ABI 1.8) on cuda: the same checks against the same padded run (which shares its
# prompts through prefix attention), and each step computes fewer positions (train/positions)
# than the unshared packs of (3): the groups' prompts once per pack.
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2")
. "$SRC/tests/cli/skip.sh"
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
    if grep -q "no CUDA device\|not built\|cannot load\|not found (tried" cuda.log; then
        # no GPU: a skip; the emulated module (built with the project): a skip outside CI only
        [ "${GRPO_CUDA_EMULATION:-0}" = 1 ] && skip_or_fail "$(grep -m1 backend cuda.log)"
        echo "SKIP: $(grep -m1 backend cuda.log)"; exit 77
    fi
    cat cuda.log; exit 1
fi
# metric KEY of line N of a metrics.jsonl
metric() { sed -n "${2}p" "$1/metrics.jsonl" | grep -o "\"$3\": [^,}]*" | sed 's/.*: //'; }
close() { # A B RTOL NAME [ATOL]: |a - b| <= rtol * max(|a|, |b|) + atol (atol default 1e-10)
    awk -v a="$1" -v b="$2" -v r="$3" -v n="$4" -v t="${5:-1e-10}" 'BEGIN {
        d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); mb = (b < 0 ? -b : b);
        if (mb > m) m = mb;
        if (d > r * m + t) { printf "%s: cpu %s, cuda %s (rtol %s, atol %s)\n", n, a, b, r, t;
                             exit 1 } }'
}
fail=0
u2=0.0078125 # 2u, u = 2^-8: bf16's unit roundoff (header)
f32_step() { # N: step N of the f32 cuda run against cpu
    [ "$(metric cpu "$1" reward)" = "$(metric cuda "$1" reward)" ] ||
        { echo "step $1 reward: cpu $(metric cpu "$1" reward), cuda $(metric cuda "$1" reward)"
          return 1; }
    close "$(metric cpu "$1" entropy)" "$(metric cuda "$1" entropy)" 1e-4 "step $1 entropy" &&
    close "$(metric cpu "$1" grad_norm)" "$(metric cuda "$1" grad_norm)" 1e-4 "step $1 grad_norm" &&
    close "$(metric cpu "$1" loss)" "$(metric cuda "$1" loss)" 1e-4 "step $1 loss" 1e-9 &&
    close "$(metric cpu "$1" kl)" "$(metric cuda "$1" kl)" 1e-4 "step $1 kl" 1e-9
}
bf16_step() { # N: step N of the bf16 cuda run against the f32 cpu run
    local b=cuda_bf16 a
    [ "$(metric cpu "$1" reward)" = "$(metric $b "$1" reward)" ] ||
        { echo "bf16 step $1 reward: cpu $(metric cpu "$1" reward), cuda bf16" \
               "$(metric $b "$1" reward): a token drawn differently (see the header)"; return 1; }
    a=$(awk -v u="$u2" -v m="$(metric cpu "$1" advantage/abs_mean)" 'BEGIN { print u * m }')
    close "$(metric cpu "$1" entropy)" "$(metric $b "$1" entropy)" $u2 "bf16 step $1 entropy" &&
    close "$(metric cpu "$1" grad_norm)" "$(metric $b "$1" grad_norm)" $u2 \
          "bf16 step $1 grad_norm" &&
    close "$(metric cpu "$1" loss)" "$(metric $b "$1" loss)" $u2 "bf16 step $1 loss" "$a" &&
    close "$(metric cpu "$1" kl)" "$(metric $b "$1" kl)" 0 "bf16 step $1 kl" 6.1e-5 || return 1
    [ -n "$(metric $b "$1" sampling/importance_sampling_ratio/mean)" ] ||
        { echo "bf16 step $1: no importance-sampling metrics (the bf16 rollout copy did not run)"
          return 1; }
    ! close "$(metric cuda "$1" grad_norm)" "$(metric $b "$1" grad_norm)" 1e-5 x >/dev/null ||
        { echo "bf16 step $1: grad_norm equals the f32 run's (bf16 did not run)"; return 1; }
}
awk -v g="$(metric cpu 1 grad_norm)" 'BEGIN { exit !(g > 1e-8) }' ||
    { echo "step 1 grad_norm is $(metric cpu 1 grad_norm): the comparison would be empty"; fail=1; }
[ "$(wc -l < cpu/metrics.jsonl)" = 2 ] && [ "$(wc -l < cuda/metrics.jsonl)" = 2 ] ||
    { echo "expected 2 steps logged by each run"; fail=1; }
f32_step 1 || fail=1
f32_step 2 || fail=1
"$G" train cuda_bf16.ini >bf16.log 2>&1 || { cat bf16.log; fail=1; }
if [ -f cuda_bf16/metrics.jsonl ]; then
    bf16_step 1 || fail=1
    bf16_step 2 || fail=1
else
    echo "bf16: no metrics"; fail=1
fi
# (3) packed micro-batches on cuda against padded ones, on ragged prompts (packs not sharing)
printf '{"prompt": "%s", "answer": "%s"}\n' "1+2=" 3 "123+4567=" 4690 "7+80=" 87 \
    "1000+2000+3000+4000+5000+6000=" 21000 "55+5=" 60 "9999+1=" 10000 >ragged.jsonl
packed_step() { # N RUN: step N of a packed run against the padded one
    local a=cuda_rag b=$2
    [ "$(metric $a "$1" reward)" = "$(metric $b "$1" reward)" ] ||
        { echo "packed step $1 reward: padded $(metric $a "$1" reward)," \
               "packed $(metric $b "$1" reward)"; return 1; }
    [ "$(metric $b "$1" train/padding_frac)" = 0 ] &&
    [ "$(metric $a "$1" train/padding_frac)" != 0 ] ||
        { echo "packed step $1: padding_frac $(metric $b "$1" train/padding_frac) (padded" \
               "run: $(metric $a "$1" train/padding_frac)): expected 0 (and not 0)"; return 1; }
    close "$(metric $a "$1" entropy)" "$(metric $b "$1" entropy)" 1e-4 "packed $1 entropy" &&
    close "$(metric $a "$1" grad_norm)" "$(metric $b "$1" grad_norm)" 1e-4 "packed $1 grad_norm" &&
    close "$(metric $a "$1" loss)" "$(metric $b "$1" loss)" 1e-4 "packed $1 loss" 1e-9 &&
    close "$(metric $a "$1" kl)" "$(metric $b "$1" kl)" 1e-4 "packed step $1 kl" 1e-9
}
rag=(--set data.path=ragged.jsonl)
if "$G" train cuda.ini "${rag[@]}" --set log.dir=cuda_rag --set checkpoint.dir=cuda_rag/ck \
       >cuda_rag.log 2>&1 &&
   "$G" train cuda.ini "${rag[@]}" --set train.max_tokens_per_microbatch=100 \
       --set train.shared_prefix=false \
       --set log.dir=packed --set checkpoint.dir=packed/ck >packed.log 2>&1 &&
   [ "$(wc -l < cuda_rag/metrics.jsonl)" = 2 ] && [ "$(wc -l < packed/metrics.jsonl)" = 2 ]; then
    packed_step 1 packed || fail=1
    packed_step 2 packed || fail=1
else
    echo "packed on cuda: expected 2 steps of each run:"; cat cuda_rag.log packed.log; fail=1
fi
# (4) packs that share their prompts on cuda
fewer_positions() { # N: the shared packs of step N computed fewer positions than the unshared
    local s p
    s=$(metric packed_sp "$1" train/positions) p=$(metric packed "$1" train/positions)
    awk -v s="$s" -v p="$p" 'BEGIN { exit !(s > 0 && s < p) }' ||
        { echo "shared packs step $1: train/positions $s, unshared $p: expected fewer"
          return 1; }
}
if "$G" train cuda.ini "${rag[@]}" --set train.max_tokens_per_microbatch=100 \
       --set log.dir=packed_sp --set checkpoint.dir=packed_sp/ck >packed_sp.log 2>&1 &&
   [ "$(wc -l < packed_sp/metrics.jsonl)" = 2 ]; then
    packed_step 1 packed_sp || fail=1
    packed_step 2 packed_sp || fail=1
    fewer_positions 1 || fail=1
    fewer_positions 2 || fail=1
else
    echo "packed with shared prompts on cuda: expected 2 steps:"; cat packed_sp.log; fail=1
fi
[ $fail = 0 ] || { echo "cuda_train: FAILED"; exit 1; }
echo "cuda_train: steps 1 and 2 on cuda match cpu (rewards $(metric cuda 1 reward)," \
     "$(metric cuda 2 reward); grad_norm cpu $(metric cpu 1 grad_norm), $(metric cpu 2 grad_norm)," \
     "cuda $(metric cuda 1 grad_norm), $(metric cuda 2 grad_norm)); bf16 within 2u = $u2:" \
     "grad_norm $(metric cuda_bf16 1 grad_norm), $(metric cuda_bf16 2 grad_norm)," \
     "loss $(metric cuda_bf16 1 loss), $(metric cuda_bf16 2 loss); packed (padding_frac 0)" \
     "grad_norm $(metric packed 1 grad_norm), $(metric packed 2 grad_norm); shared packs" \
     "grad_norm $(metric packed_sp 1 grad_norm), $(metric packed_sp 2 grad_norm), positions" \
     "$(metric packed_sp 1 train/positions) vs $(metric packed 1 train/positions)"
