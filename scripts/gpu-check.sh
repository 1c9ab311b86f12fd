#!/usr/bin/env bash
# scripts/gpu-check.sh — everything that needs a GPU, in one go, on a bare offline machine with an
# NVIDIA GPU, nvcc, CMake, PyTorch and transformers but no Debian -dev packages (the device
# machines this project is lent). Before: `scripts/gpu-deps.sh` on a Debian 12 build machine
# downloads the build dependencies' .deb files into .deps/debs; carry .deps with the tree.
# Usage: scripts/gpu-check.sh OUT_DIR        (aim: under 8 minutes on one H200)
# Writes OUT_DIR/summary.txt (what ran, pass/fail, the numbers; the last lines of every failed
# test and bench, so an abort's message is in the summary) and OUT_DIR/*.log. Exits 1 when
# anything failed (the summary's last line says what), else 0.
#  1. unpacks the .debs into .deps/prefix (dpkg -x: nothing is installed), points pkg-config there
#  2. builds grpo, the CUDA backend (nvcc) and the tests (Release, all cores)
#  3. runs the cuda tests natively: op parity (test_cuda_*), whole-model parity against the
#     transformers fixtures (test_dense/test_moe/test_lora with GRPO_TEST_BACKEND=cuda), packed
#     against padded training and streamed checkpoints (test_packed_training,
#     test_checkpoint_stream: the same) and
#     `grpo train` of the embedded default on cuda against cpu (cli_cuda_train)
#  4. benches against PyTorch on the same GPU (bench/bench_gpu.c, bench/bench_gpu_torch.py):
#     decode tokens/s at 64 rows and fwd+bwd bf16 MFU on random Qwen2.5-0.5B- and
#     MiniMind2-small-shaped models. (One whole GRPO step against PyTorch eager on the GPU is not
#     scripted yet: bench/bench_grpo_step.py is CPU-only.)
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
mkdir -p "$out"; out=$(realpath "$out")
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
failures=()
t0=$(date +%s)
say "gpu-check $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# ---- 1. dependencies from .deb files -------------------------------------------------------
prefix=$root/.deps/prefix
if ls .deps/debs/*.deb >/dev/null 2>&1; then
    mkdir -p "$prefix"
    for f in .deps/debs/*.deb; do dpkg -x "$f" "$prefix"; done
    lib=$prefix/usr/lib/x86_64-linux-gnu
    # only the sonames this machine lacks go on LD_LIBRARY_PATH (never shadow its own libraries);
    # Debian's openblas lives in openblas-pthread/ (update-alternatives links it, dpkg -x not)
    mkdir -p "$prefix/missing"
    for so in "$lib"/*.so.* "$lib"/openblas-pthread/*.so.*; do
        name=$(basename "$so")
        case "$name" in *.so.[0-9]*) ;; *) continue ;; esac
        ldconfig -p | grep -q " $name " || ln -sf "$so" "$prefix/missing/$name"
    done
    export LD_LIBRARY_PATH=$prefix/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cat >"$prefix/pkg-config" <<EOF
#!/bin/sh
PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig \
PKG_CONFIG_SYSROOT_DIR=$prefix \
LD_LIBRARY_PATH=$lib exec $prefix/usr/bin/pkgconf "\$@"
EOF
    chmod +x "$prefix/pkg-config"
    pkgcfg=(-DPKG_CONFIG_EXECUTABLE="$prefix/pkg-config" -DCMAKE_PREFIX_PATH="$prefix/usr")
    say "deps: $(ls .deps/debs/*.deb | wc -l) .deb files unpacked into .deps/prefix"
else
    pkgcfg=()
    say "deps: no .deps/debs (run scripts/gpu-deps.sh on the build machine): using the system's"
fi

# ---- 2. build ------------------------------------------------------------------------------
build=$root/build-gpu
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${pkgcfg[@]}" \
         >"$out/configure.log" 2>&1 &&
   cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1; then
    say "build: ok ($(( $(date +%s) - t0 )) s)"
else
    say "build: FAILED (configure.log, build.log)"; tail -30 "$out/build.log" "$out/configure.log"
    exit 1
fi
[ -f "$build/backends/libgrpo_kernels_cuda.so" ] || say "build: no CUDA backend module was built"

# ---- 3. tests on the GPU -------------------------------------------------------------------
tests='^(test_cuda_[a-z_]+|test_(dense|moe|lora|packed_training|checkpoint_stream)_cuda|cli_cuda_train)$'
# Each failed test of a ctest --output-on-failure log (ctest prints a test's output right after
# its result line, up to the next Start or result line): its first 3 messages from grpo (an
# abort's "grpo: FILE:LINE: ..." and "fatal: ..."), then its last 8 lines.
failed_tails() { # LOG
    awk -v keep=8 '
        function flush(  i, s) {
            if (name != "") {
                print "  -- " name ": its first grpo messages, then its last lines --"
                for (i = 1; i <= m; i++) print "     " msg[i]
                if (m) print "     ..."
                s = n > keep ? n - keep : 0
                for (i = s + 1; i <= n; i++) print "     " buf[i]
            }
            name = ""; n = 0; m = 0
        }
        /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
            flush(); if ($0 !~ /(Passed|Skipped)/) name = $4; next
        }
        /^ *Start +[0-9]+: / || /tests passed, / { flush(); next }
        name != "" && NF { buf[++n] = $0; if (m < 3 && /^(grpo|fatal):/) msg[++m] = $0 }
        END { flush() }' "$1"
}
ctest --test-dir "$build" -R "$tests" -E '_emu$' -j4 --timeout 300 --output-on-failure \
      >"$out/tests.log" 2>&1
say "tests (native GPU): $(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)"
grep -E '^ *[0-9]+/[0-9]+ Test' "$out/tests.log" | sed 's/^ */  /' >>"$summary"
failed_tails "$out/tests.log" >>"$summary"
grep -qE '^100% tests passed' "$out/tests.log" || failures+=(tests)

# ---- 4. benches ----------------------------------------------------------------------------
# A bench that fails (an abort, a signal, the timeout) says so with its exit status and its
# last lines: its numbers alone would hide where it stopped.
bench() { # NAME COMMAND...
    local name=$1 rc; shift
    timeout 240 "$@" >"$out/$name.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then say "bench $name:"
    elif [ $rc -eq 124 ]; then say "bench $name: FAILED (timed out after 240 s)"
    elif [ $rc -gt 128 ]; then say "bench $name: FAILED (killed by signal $((rc - 128)))"
    else say "bench $name: FAILED (exit $rc)"; fi
    grep -E '^(decode|fwd\+bwd|shape|step|ratio|peak|gpu)' "$out/$name.log" | sed 's/^/  /' >>"$summary"
    if [ $rc -ne 0 ]; then
        failures+=("bench $name")
        echo "  -- $name: last lines of its output --" >>"$summary"
        tail -n 12 "$out/$name.log" | sed 's/^/     /' >>"$summary"
    fi
}
bench qwen05b_grpo "$build/bench/bench_gpu" --shape qwen2.5-0.5b --dtype bf16 --rows 64 \
      --prompt 64 --new 128 --batch 8 --seq 512 --steps 5
bench qwen05b_torch env LD_LIBRARY_PATH= python3 bench/bench_gpu_torch.py --shape qwen2.5-0.5b \
      --rows 64 --prompt 64 --new 128 --batch 8 --seq 512 --steps 5
bench minimind_grpo "$build/bench/bench_gpu" --shape minimind2-small --dtype bf16 --rows 64 \
      --prompt 64 --new 128 --batch 16 --seq 256 --steps 5
bench minimind_torch env LD_LIBRARY_PATH= python3 bench/bench_gpu_torch.py \
      --shape minimind2-small --rows 64 --prompt 64 --new 128 --batch 16 --seq 256 --steps 5
say "total $(( $(date +%s) - t0 )) s"
if [ ${#failures[@]} -gt 0 ]; then
    say "RESULT: FAILED: ${failures[*]}"
    exit 1
fi
say "RESULT: ok"
