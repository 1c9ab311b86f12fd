#!/usr/bin/env bash
# omp_wait.sh GRPO — grpo chooses a short OpenMP spin for itself (core/cli/main.c, issue 14): with
# neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set it re-executes itself once, with its arguments,
# under a GOMP_SPINCOUNT below libgomp's default (300000); a user's GOMP_SPINCOUNT or
# OMP_WAIT_POLICY is left as it is, and GRPO_OMP_SET=1 skips the re-exec. The environment grpo
# ran under is read back through an exec reward (a program grpo starts inherits it), which
# writes it to a file and exits.
set -uo pipefail
grpo=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
printf '[reward.env]\nplugin = builtin.exec\ncommand = sh\ncommand = -c\n' > run.ini
echo 'command = env > env.txt' >> run.ini
echo '{"prompt": "1+1=", "completion": "2"}' > in.jsonl
fail=0
score() { # ENV-ASSIGNMENTS...: runs grpo reward score under them; prints the OpenMP settings seen
    rm -f env.txt
    out=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u GRPO_OMP_SET "$@" \
          "$grpo" reward score --config run.ini --input in.jsonl 2>/dev/null)
    # its arguments survived the re-exec when it scored the line
    [[ $out == *'"line": 1'* ]] ||
        { echo "FAIL: $*: grpo reward score printed '$out'" >&2; return; }
    grep -E '^(GOMP_SPINCOUNT|OMP_WAIT_POLICY)=' env.txt | sort | tr '\n' ' '
}
seen=$(score)
spin=${seen#GOMP_SPINCOUNT=}; spin=${spin%% *}
if [[ $seen != GOMP_SPINCOUNT=* || ! $spin =~ ^[0-9]+$ || $spin -ge 300000 || $spin -le 0 ]]; then
    echo "FAIL: nothing set: expected a GOMP_SPINCOUNT in (0, 300000), got '$seen'"; fail=1
fi
seen=$(score GOMP_SPINCOUNT=123)
[[ $seen == 'GOMP_SPINCOUNT=123 ' ]] ||
    { echo "FAIL: GOMP_SPINCOUNT=123 set by the user became '$seen'"; fail=1; }
seen=$(score OMP_WAIT_POLICY=passive)
[[ $seen == 'OMP_WAIT_POLICY=passive ' ]] ||
    { echo "FAIL: OMP_WAIT_POLICY=passive set by the user became '$seen'"; fail=1; }
seen=$(score GRPO_OMP_SET=1)
[[ -z $seen ]] || { echo "FAIL: GRPO_OMP_SET=1 (no re-exec) still ran with '$seen'"; fail=1; }
[[ $fail == 0 ]] && echo "ok   grpo's own spin count ($spin) unless the user sets the wait policy"
exit $fail
