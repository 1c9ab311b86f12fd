#!/usr/bin/env bash
# oom.sh GRPO SANITIZE — an allocation that does not fit under a memory limit is an error naming
# the buffer and its size (issue 34: it had become a bare "out of memory"), exit 1, no crash.
# The limit: `ulimit -v` (address space) in a normal build; under AddressSanitizer, whose shadow
# memory needs terabytes of address space, the allocator's own cap (max_allocation_size_mb with
# allocator_may_return_null), which fails the same big allocations.
set -uo pipefail
grpo=$1 sanitize=$2
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT && cd "$work" || exit 1
"$grpo" init-model init --hidden 64 --layers 1 --heads 2 --kv-heads 2 --intermediate 64 \
    --seed 3 >/dev/null 2>&1 || { echo "FAIL: init-model"; exit 1; }
printf '{"prompt": "1+1=", "answer": "2"}\n' > data.jsonl
cat > run.ini <<INI
[model]
path = init
[data]
path = data.jsonl
[sampling]
num_generations = 256
max_completion_length = 32768
[train]
steps = 1
batch_prompts = 1
threads = 1
[log]
dir = log
[reward.len]
plugin = builtin.length
INI
# 256 rows x (32768 + prompt) slots x 1 layer x (K,V) x 64 floats: 4 GiB of KV cache, and
# the activations of 256 rows (which reuse the cache's memory: host/work_memory.h; the
# rollout's kept activations, which do not, only warn and are computed again)
if [[ $sanitize == ON ]]; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=1024"
    timeout 60 "$grpo" train run.ini > out.log 2>&1
else
    (ulimit -v 2000000 && exec timeout 60 "$grpo" train run.ini) > out.log 2>&1
fi
rc=$?
failed=0
[[ $rc == 1 ]] || { echo "FAIL: expected exit 1 under the limit, got $rc"; failed=1; }
# the first of the sampler's big buffers that does not fit: the activations of its forward or
# the KV cache, each named with its shape and size
grep -qE "cannot allocate ([0-9]+ MiB of activations for \(256,[0-9]+\)|a KV cache of 256 rows x [0-9]+ slots \([0-9]+ MiB\))" out.log ||
    { echo "FAIL: no message naming the buffer (KV cache or activations) and its size"; failed=1; }
grep -qE "out of memory\$" out.log && { echo "FAIL: a bare 'out of memory'"; failed=1; }
[[ $failed == 0 ]] || { cat out.log; exit 1; }
echo "ok   under a memory limit: $(grep -o 'cannot allocate.*' out.log)"
