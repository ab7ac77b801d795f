#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
