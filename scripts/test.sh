#!/usr/bin/env bash
# scripts/test.sh — build and run the whole test suite (ctest over the Check suites).
# Usage: scripts/test.sh [--sanitize]   (--sanitize: a separate ASan+UBSan build in build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGRPO_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$(nproc)"
  # the whole-model runs under the CUDA emulation take minutes each at -O0 (tests/cuda_models.cmake)
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$(nproc)" \
    -LE cuda_emu_model
else
  scripts/setup.sh build
  # test-only: headless Chromium renders `grpo report`'s page (tests/cli/report.sh --browser)
  . scripts/packages.sh
  ensure_packages chromium
  ctest --test-dir build --output-on-failure -j"$(nproc)"
fi
