#!/usr/bin/env bash
# Installs shardproof's build and test dependencies from Debian 12's packages
# (skipped when already present), then configures and builds into ./build.
# Usage: tools/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ pkg-config libz3-dev llvm-15-dev libprotobuf-dev
  protobuf-compiler libonnx-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  libbenchmark-dev libcli11-dev python3-onnx python3-torch
  libgoogle-perftools-dev  # tcmalloc_minimal: the CLI's allocator (docs/performance.md item 91)
  python3-jsonschema python3-rfc3987  # tests/sarif: SARIF logs against the schema (rfc3987: uri formats)
  clang-14 libclang-rt-14-dev  # clang-14 + its runtimes: sanitizer build and libFuzzer
  chromium)  # headless, for the check --html test (tests/html)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # --no-install-recommends: otherwise Qt, gdal and codecs come along (1+ GiB).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build
