#!/usr/bin/env bash
# scripts/gpu-deps.sh — on a Debian 12 build machine with network: download the .deb files of
# grpo's build dependencies into .deps/debs (git-ignored), so that scripts/gpu-check.sh can build
# grpo on a bare, offline GPU machine that has nvcc, CMake, PyTorch and transformers but no
# Debian -dev packages. The packages are only unpacked there (dpkg -x into .deps/prefix), never
# installed: the C library, compilers and libgomp are the machine's own.
# Usage: scripts/gpu-deps.sh            (then carry .deps to the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.deps/debs
mkdir -p "$dir"
ex=$(git rev-parse --git-path info/exclude); grep -qx "/.deps/" "$ex" 2>/dev/null || echo "/.deps/" >>"$ex"
# headers and link-time libraries of what CMakeLists.txt finds with pkg-config, plus the
# run-time libraries they pull in that a non-Debian image may lack (same sonames elsewhere).
pkgs=(pkgconf pkgconf-bin libpkgconf3
      libinih-dev libinih1 libinireader0
      libcjson-dev libcjson1
      libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
      libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5
      libarchive-dev libarchive13 libnettle8 libxml2 libicu72 liblz4-1 libzstd1 libacl1
      libssl-dev libssl3
      libcurl4-openssl-dev libcurl4 libbrotli1 libgssapi-krb5-2 libkrb5-3 libk5crypto3
      libkrb5support0 libkeyutils1 libcom-err2 libldap-2.5-0 libsasl2-2 libsasl2-modules-db
      libdb5.3 libnghttp2-14 libpsl5 librtmp1 libgnutls30 libhogweed6 libgmp10 libp11-kit0
      libtasn1-6 libunistring2 libidn2-0 libffi8 libssh2-1 libgcrypt20 libgpg-error0
      check libsubunit-dev libsubunit0)
missing=()
for p in "${pkgs[@]}"; do
    ls "$dir/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$dir" && apt-get download "${missing[@]}")
fi
du -sh "$dir"
