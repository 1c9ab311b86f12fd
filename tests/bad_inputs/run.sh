#!/usr/bin/env bash
# tests/bad_inputs/run.sh — runs every case of the bad-input catalogue (tests/bad_inputs/cases/*)
# through the grpo binary and checks its exit status and stderr against the case's `expect`.
# The case format is described in tests/bad_inputs/README.md.
#
# Usage: run.sh --grpo BIN --work DIR [--packs DIR] [--test-packs DIR] [--jobs N] [--timeout S]
#               [CASE...]        (no CASE: all of them)
# Prints one line per case and a closing "N passed, M failed"; exits 1 when any case failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
grpo="" work="" packs="" test_packs="" jobs=$(nproc) limit=20 one=""
while [ $# -gt 0 ]; do
  case "$1" in
    --grpo) grpo=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --packs) packs=$2; shift 2 ;;
    --test-packs) test_packs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --one) one=$2; shift 2 ;; # internal: run one case (the parallel workers)
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ -z "$grpo" ] || [ -z "$work" ]; then
  echo "usage: run.sh --grpo BIN --work DIR [--packs DIR] [--test-packs DIR] [--jobs N]" \
    "[--timeout S] [CASE...]" >&2
  exit 2
fi
# cases run in their own directories: every path given becomes absolute
abs() { [ -n "$1" ] && realpath -m -- "$1"; }
grpo=$(abs "$grpo") work=$(abs "$work") packs=$(abs "$packs") test_packs=$(abs "$test_packs")
unset GRPO_PLUGIN_PATH # only the dirs a case names, and the binary's own packs
export GRPO=$grpo SRC=$src PACKS=$packs TEST_PACKS=$test_packs

# A sanitizer report means the case is broken, whatever the exit status says.
sanitizer_re='ERROR: (Address|Leak)Sanitizer|runtime error:|UndefinedBehaviorSanitizer'
sanitizer_re+='|AddressSanitizer:DEADLYSIGNAL'

# Runs case $1 in $work/$1 and writes one result line to $work/$1.result.
run_case() {
  local name=$1 dir=$work/$1 case_dir=$here/cases/$1
  local res=$dir.result
  if [ ! -f "$case_dir/cmd" ] || [ ! -f "$case_dir/expect" ]; then
    echo "FAIL $name: no case $case_dir (expected its cmd and expect files)" >"$res"
    return
  fi
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$case_dir/." "$dir/" &&
    cp -r "$work/_model" "$dir/model"
  cd "$dir" || { echo "FAIL $name: cannot enter $dir" >"$res"; return; }
  if [ -f setup ] && ! bash -e ./setup >setup.log 2>&1; then
    echo "FAIL $name: setup failed: $(tail -n 1 setup.log)" >"$res"
    return
  fi
  # cmd: one line of grpo arguments (shell words); @DIR@ is this case's work dir
  local line
  line=$(grep -v '^[[:space:]]*#' cmd | grep -m1 .)
  line=${line//@DIR@/$dir}
  line=${line//@SRC@/$src}
  line=${line//@PACKS@/$packs}
  line=${line//@TEST_PACKS@/$test_packs}
  eval "set -- $line"
  local input=/dev/null
  [ -f stdin ] && input=stdin
  # env: NAME=VALUE lines set for the grpo run only (test-only switches such as
  # GRPO_TEST_NO_AVX512BF16)
  local vars=()
  [ -f env ] && mapfile -t vars < <(grep -v '^[[:space:]]*#' env | grep .)
  env ${vars[@]+"${vars[@]}"} timeout -k 5 "$limit" "$grpo" "$@" <"$input" >stdout 2>stderr
  local rc=$?
  local want_rc
  want_rc=$(sed -n 's/^exit \([0-9]*\)$/\1/p' expect | head -n 1)
  local why=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    why="timed out after ${limit}s"
  elif grep -Eq "$sanitizer_re" stderr; then
    why="sanitizer report: $(grep -Em1 "$sanitizer_re" stderr)"
  elif [ "$rc" != "$want_rc" ]; then
    why="exit $rc, expected $want_rc"
  else
    local want
    while IFS= read -r want; do
      case "$want" in
        '' | '#'* | 'exit '*) continue ;;
        're: '*) grep -Eq -- "${want#re: }" stderr || why="stderr lacks pattern '${want#re: }'" ;;
        *) grep -Fq -- "$want" stderr || why="stderr lacks '$want'" ;;
      esac
      [ -n "$why" ] && break
    done <expect
  fi
  if [ -n "$why" ]; then
    echo "FAIL $name: $why; stderr: $(head -c 400 stderr | tr '\n' '|')" >"$res"
  else
    echo "ok   $name" >"$res"
  fi
}

if [ -n "$one" ]; then
  run_case "$one"
  exit 0
fi

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  for d in "$here"/cases/*/; do cases+=("$(basename "$d")"); done
fi
rm -rf "$work" && mkdir -p "$work"
# the tiny model every case gets a copy of (as ./model)
if ! "$grpo" init-model "$work/_model" --hidden 32 --layers 1 --heads 2 --kv-heads 1 \
  --intermediate 64 >"$work/init-model.log" 2>&1; then
  echo "bad_inputs: grpo init-model failed:" >&2
  cat "$work/init-model.log" >&2
  exit 1
fi
printf '%s\n' "${cases[@]}" | xargs -P "$jobs" -I{} bash "$0" --grpo "$grpo" --work "$work" \
  --packs "$packs" --test-packs "$test_packs" --timeout "$limit" --one {}
passed=0 failed=0 failures=()
for name in "${cases[@]}"; do
  line=$(cat "$work/$name.result" 2>/dev/null || echo "FAIL $name: no result")
  echo "$line"
  if [ "${line:0:2}" = "ok" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
done
echo "bad_inputs: $passed passed, $failed failed"
if [ $failed -gt 0 ]; then
  echo "bad_inputs: failed cases: ${failures[*]}"
  exit 1
fi
