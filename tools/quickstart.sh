#!/usr/bin/env bash
# One command from a fresh clone: install, build, check two shipped examples (a
# correct tensor-parallel MLP, VERIFIED, and one with a bug, REFUTED), then
# capture a Megatron-style Llama layer from its PyTorch code and check it.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
for spec in specs/examples/mlp_tp2.yaml specs/examples/mlp_bias_before_reduce.yaml; do
  echo
  echo "\$ build/shardproof check $spec"
  build/shardproof check "$spec"
  echo "(exit code $?)"
done
# Your own code: a Megatron-style Llama layer against its HF-style reference,
# traced with torch.export under torch's fake process group (docs/capture.md).
out=$(mktemp -d)
for cmd in "tools/shardproof-torch export tests/models/megatron/llama.py:llama_tp --world-size 2 --out $out -q" \
           "build/shardproof init $out/reference.onnx --ranks $out/rank{r}.onnx --world-size 2 -o $out/spec.yaml" \
           "build/shardproof check --no-table $out/spec.yaml"; do
  echo
  echo "\$ $cmd"
  $cmd
  echo "(exit code $?)"
done
rm -rf "$out"
