// The guesses behind `shardproof init` (Draft.cpp writes them as YAML): how
// one tensor of the reference relates to the tensors of the same name on the
// ranks, from shapes and, where both sides hold data, from values.
#pragma once

#include "shardproof/ir/ShapeInference.h"

#include <string>
#include <vector>

namespace shardproof::spec::draft {

struct Guess {
  std::string placement;                // YAML flow text: `replicated`, `{shard: 1, split: even}`, `TODO`
  std::string why;                      // the comment beside it
  std::vector<std::string> constraints; // assumptions the placement needs ("seq % 2 == 0")
  bool todo = false;
  bool omit = false; // an initializer equal on every rank: a constant, no placement needed
};

/// What one side knows of a tensor.
struct Side {
  bool present = false;
  ir::DType dtype = ir::DType::Other;
  std::optional<ir::Shape> shape;
  std::shared_ptr<const ir::TensorData> data; // initializer values, if any
};

/// `ref` against its namesakes on the ranks. `refSymbols` are the size names
/// the reference uses (a rank dim outside them is rank-only: `seq_local`).
/// `output`: the tensor is a claim, not an assumption (no values, no bindings).
Guess guessPlacement(const std::string &name, const Side &ref, const std::vector<Side> &ranks,
                     const std::vector<std::string> &refSymbols, bool output);

/// The rows of the embedding table that integer input `id` of `g` indexes
/// (it is a Gather's indices into a table of known size); nullopt otherwise.
std::optional<int64_t> tableRows(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes, int id);

std::string dimsText(const ir::Shape &s); // "[seq, batch, 16]"

} // namespace shardproof::spec::draft
