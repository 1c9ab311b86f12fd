#!/usr/bin/env bash
# scripts/gpu-check.sh — everything that needs a GPU, in one go, on a bare offline machine with an
# NVIDIA GPU, nvcc, CMake, PyTorch and transformers but no Debian -dev packages (the device
# machines this project is lent). Before: `scripts/gpu-deps.sh` on a Debian 12 build machine
# downloads the build dependencies' .deb files into .deps/debs; carry .deps with the tree.
# Usage: scripts/gpu-check.sh OUT_DIR        (aim: under 8 minutes on one H200)
# Writes OUT_DIR/summary.txt (what ran, pass/fail, the numbers) and OUT_DIR/*.log.
#  1. unpacks the .debs into .deps/prefix (dpkg -x: nothing is installed), points pkg-config there
#  2. builds grpo, the CUDA backend (nvcc) and the tests (Release, all cores)
#  3. runs the cuda tests natively: op parity (test_cuda_*), whole-model parity against the
#     transformers fixtures (test_dense/test_moe/test_lora with GRPO_TEST_BACKEND=cuda) and
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
tests='^(test_cuda_[a-z_]+|test_dense_cuda|test_moe_cuda|test_lora_cuda|cli_cuda_train)$'
ctest --test-dir "$build" -R "$tests" -E '_emu$' -j4 --timeout 300 --output-on-failure \
      >"$out/tests.log" 2>&1
say "tests (native GPU): $(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)"
grep -E '^ *[0-9]+/[0-9]+ Test' "$out/tests.log" | sed 's/^ */  /' >>"$summary"

# ---- 4. benches ----------------------------------------------------------------------------
bench() { # NAME COMMAND...
    local name=$1; shift
    if timeout 240 "$@" >"$out/$name.log" 2>&1; then say "bench $name:"; else say "bench $name: FAILED"; fi
    grep -E '^(decode|fwd\+bwd|shape|step|ratio|peak|gpu)' "$out/$name.log" | sed 's/^/  /' >>"$summary"
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
