#!/usr/bin/env bash
# eval_adapter.sh GRPO SRC — `grpo eval RUN.ini --adapter CHECKPOINT` on a LoRA run's own
# checkpoint: the adapter goes on model.path (the README's word), not on the newest checkpoint of
# checkpoint.dir (which for a LoRA run holds only adapters, so loading it as the base fails).
# A tiny random-init model (grpo init-model), 2 LoRA steps with a checkpoint each; then:
#   1. eval --adapter CKPT succeeds, and its JSON line names the adapter and model.path;
#   2. it gives the numbers of plain `grpo eval RUN.ini` (which finds the same LoRA checkpoint
#      as the newest and applies it to model.path);
#   3. --adapter of the older checkpoint (step 1) runs and is the adapter named (not the newest).
set -euo pipefail
G=$(realpath "$1"); SRC=$(realpath "$2")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
"$G" init-model init --seed 0 >/dev/null
cat >lora.ini <<EOF
[model]
path = init
[data]
path = $SRC/examples/arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 4
max_completion_length = 8
[optim]
lr = 2e-2
[lora]
r = 4
alpha = 8
[train]
steps = 2
batch_prompts = 2
seed = 1
threads = 1
[log]
dir = lora
[checkpoint]
dir = lora/ckpt
every = 1
[reward.repetition]
plugin = builtin.repetition
n = 1
scope = all
EOF
"$G" train lora.ini >train.log 2>&1 || { cat train.log; exit 1; }
ck1=$work/lora/ckpt/checkpoint-00000001 ck2=$work/lora/ckpt/checkpoint-00000002
for d in "$ck1" "$ck2"; do
    [[ -f $d/adapter_config.json && ! -e $d/model.safetensors ]] ||
        { echo "FAIL: $d is not an adapters-only LoRA checkpoint"; ls "$d"; exit 1; }
done
fail=0
ev() { "$G" eval lora.ini --limit 4 "$@" 2>eval.err || { cat eval.err >&2; return 1; }; }
out2=$(ev --adapter "$ck2") || { echo "FAIL: eval --adapter $ck2 failed"; exit 1; }
echo "eval --adapter: $out2"
[[ $out2 == *"\"adapter\": \"$ck2\""* ]] ||
    { echo "FAIL: the output does not name the adapter"; fail=1; }
[[ $out2 == *"\"model\": \"init\""* ]] ||
    { echo "FAIL: the adapter is not on model.path (init)"; fail=1; }
plain=$(ev) || { echo "FAIL: plain eval of the LoRA run failed"; exit 1; }
[[ ${plain#*\"n\"} == "${out2#*\"n\"}" ]] ||
    { echo "FAIL: eval --adapter newest differs from plain eval: $plain"; fail=1; }
out1=$(ev --adapter "$ck1") || { echo "FAIL: eval --adapter $ck1 failed"; exit 1; }
[[ $out1 == *"\"adapter\": \"$ck1\""* && $out1 == *"\"model\": \"init\""* ]] ||
    { echo "FAIL: eval --adapter $ck1: $out1"; fail=1; }
[ $fail = 0 ] || exit 1
echo "ok   eval --adapter CHECKPOINT on a LoRA run: the adapter on model.path, named in the output"
