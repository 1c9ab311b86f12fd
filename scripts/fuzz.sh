#!/usr/bin/env bash
# scripts/fuzz.sh — build the libFuzzer targets (tests/fuzz, clang with ASan+UBSan) in build-fuzz
# and run each for SECONDS, starting from its committed seeds in tests/fuzz/corpus/NAME.
# Usage: scripts/fuzz.sh [SECONDS] [NAME...]   (default 30 s each; all targets)
# Each target first replays the inputs that crashed it before (tests/fuzz/crashes/NAME/*), which
# must pass now. A crash, leak, sanitizer report or slow input fails the script; its input is
# saved as build-fuzz/crashes/NAME/crash-<sha1> (or leak-, timeout-, oom-). Reproduce one with
#   build-fuzz/fuzz/fuzz_NAME build-fuzz/crashes/NAME/crash-...
# New inputs libFuzzer finds go to build-fuzz/corpus/NAME, never into the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
build="build-fuzz"
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(safetensors tokenizer dataset run_ini manifest jinja model_config tokenizer_config
    adapter_config trainer_state exec_reply pack_bundle)

# clang, libFuzzer and the sanitizer runtimes (libclang-rt-dev), clang's OpenMP (libomp-dev)
. scripts/packages.sh
ensure_packages clang libclang-rt-dev libomp-dev

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DGRPO_FUZZ=ON -DGRPO_BUILD_TESTS=OFF -DGRPO_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target fuzz -j"$(nproc)"

failed=()
for name in "${targets[@]}"; do
  corpus=$build/corpus/$name crashes=$build/crashes/$name
  mkdir -p "$corpus" "$crashes"
  # first the inputs that crashed it before (tests/fuzz/crashes/NAME): each must now pass
  known=() replay=$build/replay_$name.log
  [ -d "tests/fuzz/crashes/$name" ] &&
    mapfile -t known < <(find "tests/fuzz/crashes/$name" -type f | sort)
  if [ ${#known[@]} -gt 0 ] && ! "$build/fuzz/fuzz_$name" "${known[@]}" >"$replay" 2>&1; then
    failed+=("$name")
    echo "fuzz: $name FAILED on a known crash input of tests/fuzz/crashes/$name (log $replay):"
    grep -E 'Running:|ERROR:|runtime error|SUMMARY' "$replay" | head -n 4 || true
    continue
  fi
  echo "fuzz: $name for ${seconds}s"
  # -timeout: one input taking longer is a bug too (a hang); -rss_limit_mb: so is a memory blow-up
  if ! "$build/fuzz/fuzz_$name" "$corpus" "tests/fuzz/corpus/$name" -max_total_time="$seconds" \
    -timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$crashes/" >"$build/fuzz_$name.log" 2>&1; then
    failed+=("$name")
    echo "fuzz: $name FAILED; input(s) in $crashes, log $build/fuzz_$name.log:"
    grep -E 'ERROR:|runtime error|SUMMARY|Test unit written' "$build/fuzz_$name.log" |
      head -n 8 || true
  else
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$build/fuzz_$name.log" |
      tr '\n' ' ' | sed "s/^/fuzz: $name ok: /;s/ $/\n/"
  fi
done
passed=$((${#targets[@]} - ${#failed[@]}))
echo "fuzz: $passed passed, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (new crash inputs under $build/crashes/, logs in $build/)"
  exit 1
fi
