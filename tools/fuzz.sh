#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-14, ASan+UBSan) and runs
# each for SECONDS (default 60). Fails on any crash, hang (-timeout), leak,
# out-of-memory or sanitizer report; the input that caused it is left in
# $BUILD/fuzz/artifacts/ and the command to replay it is printed.
#
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#   TARGET: onnx_loader spec relation check (default: all four)
# Environment:
#   SHARDPROOF_FUZZ_BUILD  build directory (default build-fuzz); CI passes
#                          build-asan, whose libraries are built for both.
#   FUZZ_JOBS              ninja parallelism (default 2)
# The seed corpora are made here from the fixtures (specs/examples, which the
# main build fills with the exported models) plus tests/fuzz/regressions; what
# the fuzzers add stays in $BUILD/fuzz/corpus, not in git.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(onnx_loader spec relation check)
build=${SHARDPROOF_FUZZ_BUILD:-build-fuzz}

if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 and line tables: fast enough to fuzz, reports still name file:line.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DSHARDPROOF_FUZZ=ON -DSHARDPROOF_TESTS=OFF -DSHARDPROOF_MODELS=OFF >/dev/null
fi
grep -q '^SHARDPROOF_FUZZ:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "fuzz: $build is not configured with -DSHARDPROOF_FUZZ=ON" >&2; exit 2; }
ninja -C "$build" -j "${FUZZ_JOBS:-2}" "${targets[@]/#/fuzz_}"

work=$build/fuzz
rm -rf "$work/seeds"
mkdir -p "$work/seeds" "$work/artifacts"

# Seeds: the committed regression inputs, then per target the fixtures.
seed() { # TARGET NAME BYTES-FROM-STDIN
  mkdir -p "$work/seeds/$1"
  cat >"$work/seeds/$1/$2"
}
for t in "${targets[@]}"; do
  mkdir -p "$work/seeds/$t" "$work/corpus/$t"
  cp tests/fuzz/regressions/"$t"/* "$work/seeds/$t/" 2>/dev/null || true
done
specs=$(ls specs/examples/*.yaml | grep -v '\.relations\.yaml$')
for f in specs/examples/*.onnx; do
  # The large exported blocks only slow the loader fuzzer down.
  [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$work/seeds/onnx_loader/" 2>/dev/null || true
done
for f in $specs; do cp "$f" "$work/seeds/spec/" 2>/dev/null || true; done
# Expression seeds: every quoted string of the specs, with the relation target's
# header byte (bits 0-1 parser, bits 2-4 world size - 1, bit 7 any name).
n=0
grep -h -o -E '"[^"]*"' $specs | sort -u | while IFS= read -r q; do
  s=${q:1:${#q}-2}
  n=$((n + 1))
  if [[ $s == *@* ]]; then
    { printf '\x86'; printf '%s' "$s"; } | seed relation "rel2-$n"
    { printf '\x8e'; printf '%s' "$s"; } | seed relation "rel4-$n"
  elif [[ $s == *[\<\>=]* ]]; then
    { printf '\x81'; printf '%s' "$s"; } | seed relation "cond-$n"
  else
    { printf '\x80'; printf '%s' "$s"; } | seed relation "int-$n"
  fi
done
# Check seeds: a handful of fixed choice streams (see tests/fuzz/check.cpp).
for s in '' '\x00\x00\x00\x00\x00\x00\x00\x00\x00' '\x01\x01\x00\x02\x00\x00\x00\x00\x00\x01\x00\x00' \
  '\x01\x00\x00\x02\x01\x00\x01\x00\x00\x00\x00\x05\x00\x01\x02' '\x00\x02\x00\x01\x02\x00\x02\x00\x05\x00\x02\x01\x01\x01\x00\x00\x01\x04'; do
  printf "$s" | seed check "seed-$(printf "$s" | md5sum | cut -c1-8)"
done

# Z3, protobuf and yaml-cpp are not instrumented; nothing of theirs needs
# suppressing so far. Leak checking stays on.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  dict=tests/fuzz/$t.dict
  args=(-max_total_time="$secs" -timeout=25 -rss_limit_mb=2560 -max_len=4096
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$t-")
  [ -f "$dict" ] && args+=(-dict="$dict")
  echo "fuzz: $t for ${secs}s"
  start=$(date +%s)
  # A hard wall-clock bound as well: after an out-of-memory report with a
  # multi-GB heap, the sanitizer's exit-time leak scan once ran for over ten
  # minutes. A fuzzer still running long after its time is a failure, not a wait.
  if ! timeout --kill-after=10 $((secs + 180)) "$build/fuzz_$t" "${args[@]}" "$work/corpus/$t" "$work/seeds/$t" \
    >"$work/$t.log" 2>&1; then
    status=1
    echo "fuzz: $t FAILED (log: $work/$t.log)" >&2
    grep -E 'ERROR|FUZZ FINDING|runtime error|internal error|Test unit written' "$work/$t.log" | head -20 >&2 || true
    echo "fuzz: replay with: $build/fuzz_$t $work/artifacts/$t-<name>" >&2
  else
    grep -E '^stat::number_of_executed_units|^#[0-9]+ *DONE' "$work/$t.log" | tail -1 | sed "s/^/fuzz: $t: /"
  fi
  echo "fuzz: $t took $(($(date +%s) - start))s"
done
exit $status
