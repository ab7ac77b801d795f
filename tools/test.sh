#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test; then
# every test again under AddressSanitizer + UBSan, then every fuzz target for a
# bounded time. See docs/testing.md.
# Environment: FUZZ_SECONDS (per target, default 20; 0 skips fuzzing),
#              SHARDPROOF_NO_SANITIZE=1 skips the sanitizer build and fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
tools/setup.sh
# A per-test limit so that a hang fails its test instead of the whole CI run.
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
t1=$(date +%s)
echo "test: build + tests took $((t1 - t0))s"
[ "${SHARDPROOF_NO_SANITIZE:-0}" = 1 ] && exit 0

# The sanitizer build: clang-14 (for libFuzzer), -O1, ASan+UBSan on every
# target. Its libraries are also compiled for libFuzzer's coverage, so the fuzz
# targets below link against them instead of compiling everything a third time.
# The models come from the main build (specs/examples), not from PyTorch again.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  -DSHARDPROOF_FUZZ=ON -DSHARDPROOF_MODELS=OFF >/dev/null
ninja -C build-asan
# Every test again, instrumented: with layer memoization the whole suite
# takes about 5 minutes under ASan+UBSan on 2 cores (our code runs about 30
# times slower instrumented; Z3 is not instrumented). docs/testing.md lists
# the figures.
SAN_ENV=(env ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
"${SAN_ENV[@]}" ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 900
t2=$(date +%s)
echo "test: sanitizer build + tests took $((t2 - t1))s"

secs=${FUZZ_SECONDS:-20}
if [ "$secs" != 0 ]; then
  SHARDPROOF_FUZZ_BUILD=build-asan tools/fuzz.sh "$secs"
fi
echo "test: fuzzing took $(($(date +%s) - t2))s; everything took $(($(date +%s) - t0))s"
