#!/usr/bin/env bash
# blas_core.sh GRPO — the grpo binary runs OpenBLAS kernels its CPU can run well
# (kernels/cpu/blas_core.c): on a CPU with AVX2 and FMA, `grpo version` names kernels built on
# AVX2 or AVX-512, whatever OpenBLAS's own detection chose; a user's OPENBLAS_CORETYPE is kept;
# nothing is said on stderr either way. (Debian 12's OpenBLAS took a Xeon of family 6 model 207
# for Prescott: there the first check fails without blas_core.c.)
set -uo pipefail
grpo=$1
fail() { echo "FAIL: $*"; exit 1; }
avx2_cores='^(Haswell|Zen|Excavator|SkylakeX|Cooperlake|SapphireRapids)$'

flags=$(grep -m1 '^flags' /proc/cpuinfo)
err=$(env -u OPENBLAS_CORETYPE "$grpo" version 2>&1 >/dev/null)
[ -z "$err" ] || fail "grpo version said on stderr: $err"
out=$(env -u OPENBLAS_CORETYPE "$grpo" version 2>/dev/null) || fail "grpo version exited $?"
core=$(sed -n 's/^cpu backend: OpenBLAS \([^ ]*\) kernels.*$/\1/p' <<<"$out")
[ -n "$core" ] || fail "grpo version names no OpenBLAS kernels: $out"
if grep -qw avx2 <<<"$flags" && grep -qw fma <<<"$flags"; then
    grep -Eqi "$avx2_cores" <<<"$core" || fail "a CPU with AVX2 and FMA runs OpenBLAS's $core kernels"
    echo "this CPU (AVX2, FMA): OpenBLAS $core kernels"
else
    echo "this CPU has no AVX2 and FMA: OpenBLAS $core kernels (nothing to choose)"
fi

# the user's choice is kept, silently
err=$(OPENBLAS_CORETYPE=Prescott "$grpo" version 2>&1 >/dev/null)
out=$(OPENBLAS_CORETYPE=Prescott "$grpo" version 2>/dev/null)
grep -qx "cpu backend: OpenBLAS Prescott kernels" <<<"$out" ||
    fail "OPENBLAS_CORETYPE=Prescott not kept: $out"
[ -z "$err" ] || fail "with OPENBLAS_CORETYPE set, grpo said: $err"
echo "ok"
