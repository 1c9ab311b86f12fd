#!/usr/bin/env bash
# train_mpi.sh GRPO COMPARE SRC WORK HAVE_MPI MPIRUN — data-parallel `grpo train` (issue 21):
#   1. parity: `mpirun -np 2` for 3 steps against one process with the same global batch
#      (train.batch_prompts = 4: 2 prompt groups per rank): the same completions, the
#      parameters after every step within 1e-5 (fp32; the ranks' gradients are summed in another
#      order than one process accumulates them) and every metric within a relative 1e-5:
#      |a - b| <= 1e-5 max(|a|, |b|), with an absolute floor of 1e-7 that only matters near zero
#      (|a| < 1e-2): a metric that is a sum of fp32 terms of size <= 1 cancelling to ~0 (a loss
#      of zero-mean advantages) carries their rounding, fp32's epsilon 1.2e-7, not a fraction of
#      its value (tests/mpi/compare.c)
#      (and a LoRA run's adapters: 1b; multi-turn episodes of an environment: 1c); on both, the
#      sampler's log-probs equal the training forward's (sampling_logp_difference/max 0); packed
#      micro-batches (train.max_tokens_per_microbatch): 1d
#   2. a rank killed with SIGKILL ends the other; mpirun names the rank (no hang: timeout)
#   3. a rank that fails (rank 1 alone gets a missing data.path) ends the job with a line naming
#      the rank and the cause
#   4. batch_prompts that does not divide over the ranks is refused with a clear message, and
#      grpo.resample_rounds (DAPO's resampling) over 2 and 3 ranks is refused naming the key and
#      the rank count (one process under mpirun runs it)
#   5. --resume under mpirun continues exactly (the same bytes as the uninterrupted run)
#   6. grpo sft (not data parallel) refuses to run under a 2-rank launch
#   7. the cuda backend under a 2-rank launch is refused (GPU ranks need NCCL, not built)
#   8. ranks started with other settings (rank 1: another train.steps, other data rows) end
#      every rank at start with a message naming rank 1 and what differs (no hang: timeout)
# Exit 77 (skipped) without MPI, outside CI only: under CI=true (scripts/setup.sh installs MPI) a
# failure (tests/cli/skip.sh). One thread per rank, 2 ranks, oversubscribed (2 cores or 1).
set -uo pipefail
grpo=$1 compare=$2 src=$3 work=$4 have_mpi=$5 mpirun=$6
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cli/skip.sh"
[[ $have_mpi == ON ]] || skip_or_fail "this grpo was built without MPI (scripts/setup.sh installs it)"
[[ -n $mpirun && -x $mpirun ]] || skip_or_fail "mpirun not found (apt install openmpi-bin)"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
# CI runs as root; containers often forbid the shared-memory single copy (CMA)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 GRPO_PLUGIN_PATH=
# the sanitizer build: OpenMPI's own leftovers at exit are suppressed, grpo's are not
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0"
mpi=("$mpirun" -np 2 --oversubscribe)
atol=1e-7 # the absolute floor near zero (header, 1.)
failed=0
fail() { echo "FAIL: $*"; failed=1; }

"$grpo" init-model policy --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64 \
    --seed 3 >/dev/null 2>&1 || { echo "FAIL: init-model"; exit 1; }
# rewards that vary on a random model's text (length and the overlong ramp), so every step has
# advantages and gradients
cat > run.ini <<INI
[model]
path = policy
[data]
path = $src/examples/arith/train.jsonl
max_prompt_length = 32
[sampling]
num_generations = 4
max_completion_length = 16
temperature = 1.0
[grpo]
loss_type = dapo
[optim]
lr = 1e-3
[train]
steps = 3
batch_prompts = 4
threads = 1
[log]
dir = one
completions_every = 1
[checkpoint]
dir = one/ck
every = 1
keep = 10
[reward.long]
plugin = builtin.overlong
max_length = 16
cache = 12
[reward.chars]
plugin = builtin.length
min_chars = 12
max_chars = 40
INI
ckpt() { echo "$1/ck/checkpoint-0000000$2/model.safetensors"; }

# 1. parity with one process
"$grpo" train run.ini > one.log 2>&1 || { cat one.log; echo "FAIL: one process"; exit 1; }
timeout 120 "${mpi[@]}" "$grpo" train run.ini --set log.dir=two --set checkpoint.dir=two/ck \
    > two.log 2>&1 || { cat two.log; echo "FAIL: mpirun -np 2 exited $?"; exit 1; }
for s in 1 2 3; do
    "$compare" params "$(ckpt one $s)" "$(ckpt two $s)" 1e-5 || fail "step $s: parameters differ"
    "$compare" params "$(ckpt one $s)" "$(ckpt one $((s - 1)))" 0 >/dev/null 2>&1 && fail "step $s moved no parameter (no signal: the parity check would be empty)"
done 2>/dev/null
"$compare" params "$(ckpt one 1)" policy/model.safetensors 0 >/dev/null && fail "step 1 moved no parameter"
"$compare" metrics one/metrics.jsonl two/metrics.jsonl 1e-5 "$atol" || fail "metrics differ"
grep -q '"world_size": 2' two/metrics.jsonl || fail "two/metrics.jsonl has no world_size 2"
grep -q '"time/comm"' two/metrics.jsonl || fail "two/metrics.jsonl has no time/comm"
# exactly on-policy on every rank (batch-invariant kernels): the sampler's log-probs are the
# training forward's, bit for bit, at 2 ranks as at 1
for m in one two; do
    n=$(grep -c '"sampling/sampling_logp_difference/max": 0[,}]' $m/metrics.jsonl)
    [[ $n == 3 ]] || fail "$m: sampling_logp_difference/max is not 0 at every step ($n of 3)"
done
[[ $(grep -c '"rank":1' two/completions.jsonl) == 24 ]] || fail "completions.jsonl: expected 24 lines of rank 1 (3 steps x 2 groups x 4)"
# the same completions, in the same order, with rank 0 for the first half of each step
diff <(sed 's/"rank":[01],//' one/completions.jsonl) <(sed 's/"rank":[01],//' two/completions.jsonl) >/dev/null ||
    fail "the 2 ranks sampled other completions than one process"
[[ $(grep -c '^step ' two.log) == 3 ]] || fail "expected 3 progress lines (rank 0 alone prints them)"
[[ $failed == 0 ]] && echo "ok   parity: 2 ranks = 1 process (completions, parameters, metrics)"

# 1b. a LoRA run reduces its adapters' gradients the same way
lora=(--set lora.r=4 --set lora.alpha=8)
"$grpo" train run.ini "${lora[@]}" --set log.dir=lone --set checkpoint.dir=lone/ck > lone.log 2>&1 ||
    { cat lone.log; fail "LoRA: one process"; }
timeout 120 "${mpi[@]}" "$grpo" train run.ini "${lora[@]}" --set log.dir=ltwo \
    --set checkpoint.dir=ltwo/ck > ltwo.log 2>&1 || { cat ltwo.log; fail "LoRA: mpirun -np 2"; }
for s in 1 2 3; do
    a=lone/ck/checkpoint-0000000$s/adapter_model.safetensors
    "$compare" params "$a" "${a/lone/ltwo}" 1e-5 || fail "LoRA step $s: adapters differ"
done
"$compare" metrics lone/metrics.jsonl ltwo/metrics.jsonl 1e-5 "$atol" || fail "LoRA: metrics differ"
[[ $failed == 0 ]] && echo "ok   LoRA parity: 2 ranks = 1 process (adapters, metrics)"

# 1c. multi-turn episodes (issue 17): scripted.echo answers every turn with an observation (forced
#     through the KV cache, masked out of the loss) and rewards member M with M + 0.5, so the
#     groups have advantages; the episodes of 2 ranks are those of one process
sed -e '/^\[reward.long\]/,$d' run.ini > env.ini
cat >> env.ini <<INI
[env]
plugin = scripted.echo
max_turns = 3
max_episode_tokens = 24
done_after = 2
[reward.env]
plugin = builtin.env
INI
envp=(--plugin-path "$(dirname "$grpo")/tests/plugins/scripted")
"$grpo" train env.ini "${envp[@]}" --set log.dir=eone --set checkpoint.dir=eone/ck > eone.log 2>&1 ||
    { cat eone.log; fail "env: one process"; }
timeout 120 "${mpi[@]}" "$grpo" train env.ini "${envp[@]}" --set log.dir=etwo \
    --set checkpoint.dir=etwo/ck > etwo.log 2>&1 || { cat etwo.log; fail "env: mpirun -np 2"; }
for s in 1 2 3; do
    "$compare" params "$(ckpt eone $s)" "$(ckpt etwo $s)" 1e-5 || fail "env step $s: parameters differ"
done
"$compare" metrics eone/metrics.jsonl etwo/metrics.jsonl 1e-5 "$atol" || fail "env: metrics differ"
grep -q '"env/observation_tokens": [1-9]' eone/metrics.jsonl ||
    fail "env: no observation tokens (the parity would not cover the forced tokens)"
diff <(sed 's/"rank":[01],//' eone/completions.jsonl) <(sed 's/"rank":[01],//' etwo/completions.jsonl) \
    >/dev/null || fail "env: the 2 ranks' episodes differ from one process's"
[[ $failed == 0 ]] && echo "ok   env parity: 2 ranks = 1 process (episodes, parameters, metrics)"

# 1d. packed micro-batches (train.max_tokens_per_microbatch): the passes are counted over every
# rank and each pack is normalised as its micro-batch, so 2 ranks packed = 1 process packed
pk=(--set train.max_tokens_per_microbatch=48 --set train.micro_batch=3)
"$grpo" train run.ini "${pk[@]}" --set log.dir=pone --set checkpoint.dir=pone/ck >pone.log 2>&1 ||
    { cat pone.log; fail "packed: one process"; }
timeout 120 "${mpi[@]}" "$grpo" train run.ini "${pk[@]}" --set log.dir=ptwo \
    --set checkpoint.dir=ptwo/ck > ptwo.log 2>&1 || { cat ptwo.log; fail "packed: mpirun -np 2"; }
for s in 1 2 3; do
    "$compare" params "$(ckpt pone $s)" "$(ckpt ptwo $s)" 1e-5 ||
        fail "packed step $s: parameters differ"
done
"$compare" metrics pone/metrics.jsonl ptwo/metrics.jsonl 1e-5 "$atol" ||
    fail "packed: metrics differ"
grep -q '"train/padding_frac": 0[,}]' ptwo/metrics.jsonl || fail "packed: padding_frac is not 0"
[[ $failed == 0 ]] && echo "ok   packed parity: 2 ranks = 1 process (parameters, metrics)"

# 2. a killed rank ends the other
export GRPO_TEST_MARK=$$-$RANDOM
start=$SECONDS
timeout 60 "${mpi[@]}" -x GRPO_TEST_MARK "$grpo" train run.ini --set log.dir=kill \
    --set checkpoint.dir=kill/ck --set train.steps=100000 --set log.completions_every=0 \
    --set checkpoint.every=0 > kill.log 2>&1 &
job=$!
for _ in $(seq 100); do [[ -s kill/metrics.jsonl ]] && break; sleep 0.2; done
victim=
for p in $(pgrep -x grpo); do
    env=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null)
    grep -qx "GRPO_TEST_MARK=$GRPO_TEST_MARK" <<< "$env" && grep -qx OMPI_COMM_WORLD_RANK=1 <<< "$env" && victim=$p
done
[[ -n $victim ]] && kill -9 "$victim" || fail "kill: rank 1 not found"
wait $job
rc=$?
if [[ $rc == 0 || $rc == 124 ]]; then fail "kill: mpirun exited $rc (0 = not noticed, 124 = hung)"; fi
grep -q "rank 1.*signal 9\|rank 1.*Killed" kill.log || { cat kill.log; fail "kill: no message naming rank 1"; }
[[ $failed == 0 ]] && echo "ok   a killed rank ends the job in $((SECONDS - start)) s: $(grep -o 'process rank 1.*' kill.log)"

# 3. a rank that fails ends the job, naming the rank and the cause (MPMD: rank 1's data.path)
timeout 60 "$mpirun" --oversubscribe -np 1 "$grpo" train run.ini --set log.dir=bad \
    --set checkpoint.dir=bad/ck : -np 1 "$grpo" train run.ini --set log.dir=bad \
    --set checkpoint.dir=bad/ck --set data.path=missing.jsonl > bad.log 2>&1
rc=$?
if [[ $rc == 0 || $rc == 124 ]]; then fail "failing rank: mpirun exited $rc"; fi
grep -q "rank 1 of 2 failed: .*missing.jsonl" bad.log || { cat bad.log; fail "failing rank: no line naming rank 1 and missing.jsonl"; }
[[ $failed == 0 ]] && echo "ok   a failing rank ends the job: $(grep -o 'rank 1 of 2 failed.*' bad.log | cut -c1-100)"

# 4. a global batch that does not divide over the ranks
timeout 60 "${mpi[@]}" "$grpo" train run.ini --set log.dir=odd --set checkpoint.dir=odd/ck \
    --set train.batch_prompts=3 > odd.log 2>&1 && fail "batch_prompts = 3 on 2 ranks was accepted"
grep -q "train.batch_prompts = 3 is the global batch and does not divide over the 2 ranks" odd.log ||
    { cat odd.log; fail "batch_prompts = 3: no clear message"; }
[[ $failed == 0 ]] && echo "ok   batch_prompts = 3 on 2 ranks refused"
dapo=(--set grpo.drop_zero_std_groups=true --set grpo.resample_rounds=2)
for np in 2 3; do
    timeout 60 "$mpirun" -np $np --oversubscribe "$grpo" train run.ini --set log.dir=rs$np \
        --set checkpoint.dir=rs$np/ck --set train.batch_prompts=6 "${dapo[@]}" > rs$np.log 2>&1 &&
        fail "resample_rounds = 2 on $np ranks was accepted"
    grep -q "grpo.resample_rounds = 2 is not implemented over several ranks yet ($np ranks)" \
        rs$np.log || { cat rs$np.log; fail "resample_rounds on $np ranks: no clear message"; }
done
timeout 120 "$mpirun" -np 1 "$grpo" train run.ini --set log.dir=rs1 --set checkpoint.dir=rs1/ck \
    --set train.steps=1 "${dapo[@]}" > rs1.log 2>&1 ||
    { cat rs1.log; fail "resample_rounds = 2 as one process under mpirun failed"; }
[[ $failed == 0 ]] && echo "ok   resample_rounds = 2 refused on 2 and 3 ranks, run on 1"

# 5. resume under mpirun: 2 steps, then --resume to 3, = the uninterrupted run above
timeout 120 "${mpi[@]}" "$grpo" train run.ini --set log.dir=res --set checkpoint.dir=res/ck \
    --set train.steps=2 > res1.log 2>&1 || { cat res1.log; fail "resume: first part"; }
timeout 120 "${mpi[@]}" "$grpo" train run.ini --set log.dir=res --set checkpoint.dir=res/ck \
    --resume --allow-change train.steps > res2.log 2>&1 || { cat res2.log; fail "resume: second part"; }
cmp -s "$(ckpt res 3)" "$(ckpt two 3)" || fail "resume: the parameters after step 3 differ from the uninterrupted run"
"$compare" metrics res/metrics.jsonl two/metrics.jsonl 0 0 >/dev/null || fail "resume: metrics differ from the uninterrupted run"
[[ $(grep -c "resuming from" res2.log) == 1 ]] || fail "resume: expected one 'resuming from' line (rank 0)"
[[ $failed == 0 ]] && echo "ok   resume under mpirun continues exactly"

# 6. grpo sft is not data parallel: under a 2-rank launch it refuses instead of running twice
timeout 60 "${mpi[@]}" "$grpo" sft run.ini > sft.log 2>&1 && fail "grpo sft ran under mpirun -np 2"
grep -q "grpo sft runs as one process only" sft.log || { cat sft.log; fail "sft: no clear refusal"; }
[[ $failed == 0 ]] && echo "ok   grpo sft under mpirun -np 2 refused"

# 7. GPU ranks need NCCL (not built): the cuda backend (here its host emulation) under a 2-rank
#    launch is refused, not run with MPI reading device memory
GRPO_CUDA_EMULATION=1 timeout 60 "${mpi[@]}" -x GRPO_CUDA_EMULATION "$grpo" train run.ini \
    --set log.dir=gpu --set checkpoint.dir=gpu/ck --set model.backend=cuda > gpu.log 2>&1 &&
    fail "backend = cuda ran under mpirun -np 2"
grep -q "2 ranks on the cuda backend: .*GPU ranks need NCCL" gpu.log ||
    { cat gpu.log; fail "cuda under mpirun: no clear refusal"; }
[[ $failed == 0 ]] && echo "ok   backend = cuda under mpirun -np 2 refused (NCCL not built)"

# 8. ranks that do not run the same thing: rank 1 with 2 steps (it would end first and leave
#    rank 0 waiting in a collective for ever) and a data file with a row less
head -n -1 "$src/examples/arith/train.jsonl" > fewer.jsonl
timeout 60 "$mpirun" --oversubscribe -np 1 "$grpo" train run.ini --set log.dir=mis \
    --set checkpoint.dir=mis/ck : -np 1 "$grpo" train run.ini --set log.dir=mis \
    --set checkpoint.dir=mis/ck --set train.steps=2 --set data.path="$work/fewer.jsonl" \
    > mis.log 2>&1
rc=$?
[[ $rc == 124 ]] && fail "ranks with other settings: the job hung (timeout)"
[[ $rc == 0 ]] && fail "ranks with other settings: the job ran"
grep -q "rank 1 does not run what rank 0 runs: train.steps ('3' on rank 0, '2' on rank 1)" \
    mis.log && grep -q "data.path (contents differ" mis.log ||
    { cat mis.log; fail "ranks with other settings: no message naming rank 1, train.steps, data.path"; }
[[ -e mis/metrics.jsonl ]] && fail "ranks with other settings: a rank wrote metrics before the check"
[[ $failed == 0 ]] && echo "ok   ranks with other settings end at start, naming rank 1 and the keys"
exit $failed
