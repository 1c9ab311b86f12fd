#!/usr/bin/env bash
# scripts/setup.sh — install what grpo needs on Debian 12 (as root or with sudo), then build.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
. scripts/packages.sh
ensure_packages build-essential cmake pkg-config libinih-dev check libsubunit-dev libcjson-dev \
  libpcre2-dev libopenblas-dev libarchive-dev libssl-dev libcurl4-openssl-dev
# data-parallel `grpo train` under mpirun/srun (optional: without it the build is single-process)
ensure_packages openmpi-bin libopenmpi-dev
# builtin.code: the sandbox (bubblewrap) and the interpreter it runs completions with
ensure_packages bubblewrap python3
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
