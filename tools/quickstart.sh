#!/usr/bin/env bash
# One command from a fresh clone: install, build, and check two shipped examples,
# a correct tensor-parallel MLP (VERIFIED) and one with a bug (REFUTED).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
for spec in specs/examples/mlp_tp2.yaml specs/examples/mlp_bias_before_reduce.yaml; do
  echo
  echo "\$ build/shardproof check $spec"
  build/shardproof check "$spec"
  echo "(exit code $?)"
done
