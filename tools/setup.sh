#!/usr/bin/env bash
# Installs shardproof's C++ build and test dependencies from Debian 12's
# packages (skipped when already present), makes the project venv .venv/ from
# requirements.txt (PyTorch, onnx, ...; remade when that file changes), then
# configures and builds into ./build.
# Usage: tools/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ pkg-config libz3-dev llvm-15-dev libprotobuf-dev
  protobuf-compiler libonnx-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  libbenchmark-dev libcli11-dev
  libgoogle-perftools-dev  # tcmalloc_minimal: the CLI's allocator (docs/performance.md item 91)
  python3-venv  # python3 -m venv where python3 is Debian's (the venv's packages come from PyPI)
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

# The Python side: every script, generator and Python test runs in .venv,
# made with the python3 on PATH (3.11: the pinned torch wheel is cp311).
# .venv/requirements.sha256 records the requirements.txt it was made from.
venv_current() {
  [ -x .venv/bin/python ] &&
    [ "$(cat .venv/requirements.sha256 2>/dev/null)" = "$(sha256sum requirements.txt | cut -d' ' -f1)" ]
}
make_venv() {
  local py=${SHARDPROOF_VENV_PYTHON:-python3}
  if ! "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "setup: $py is not Python 3.11 (requirements.txt pins cp311 wheels);" \
      "set SHARDPROOF_VENV_PYTHON to a python3.11" >&2
    exit 1
  fi
  echo "setup: making .venv from requirements.txt with $(command -v "$py")"
  "$py" -m venv --clear .venv
  .venv/bin/python -m pip install -q -r requirements.txt
  sha256sum requirements.txt | cut -d' ' -f1 >.venv/requirements.sha256
}
venv_current || make_venv

[ "${1:-}" = "--no-build" ] && exit 0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DSHARDPROOF_PYTHON=$PWD/.venv/bin/python" >/dev/null
ninja -C build
