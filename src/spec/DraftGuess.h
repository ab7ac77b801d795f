// The guesses behind `shardproof init` (Draft.cpp writes them as YAML): how
// one tensor of the reference relates to the tensors of the same name on the
// ranks, from shapes and, where both sides hold data, from values.
#pragma once

#include "shardproof/ir/ShapeInference.h"

#include <map>
#include <string>
#include <vector>

namespace shardproof::spec::draft {

struct Guess {
  std::string placement;                // YAML flow text: `replicated`, `{shard: 1, split: even}`, `TODO`
  std::string why;                      // the comment beside it
  std::vector<std::string> constraints; // assumptions the placement needs ("seq == 2 * seq_local")
  std::vector<std::string> symbols;     // rank-only sizes the placement makes global ("seq_local")
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

/// What the guesses know of sizes: the reference's size names (a rank dim
/// outside them is rank-only, such as `seq_local`) and what the guesses so
/// far made of the rank-only ones (`seq_local` is seq / 2 under an even split).
struct Sizes {
  std::vector<std::string> refSymbols;
  int worldSize = 1;
  std::map<std::string, std::string> localOf; // rank-only name -> the reference size it splits evenly
  /// Equal as written, or equal at sample sizes that satisfy the guesses
  /// (`seq_local*2` and `seq` after an even split of seq on 2 ranks). A guess,
  /// not a proof: the check proves what the draft claims.
  bool same(const smt::Expr &a, const smt::Expr &b) const;
};

/// `ref` against its namesakes on the ranks; a guess that defines a rank-only
/// size records it in `sizes`. `output`: the tensor is a claim, not an
/// assumption (no values, no bindings).
Guess guessPlacement(const std::string &name, const Side &ref, const std::vector<Side> &ranks, Sizes &sizes,
                     bool output);

/// The size of the axis that integer input `id` of `g` indexes (it reaches a
/// Gather's or GatherElements' indices, through ops that keep its values, and
/// that axis has a known size); nullopt otherwise.
std::optional<int64_t> tableRows(const ir::Graph &g, const std::vector<ir::InferredValue> &shapes, int id);

/// Size limits the reference's own side conditions imply (DraftLimits.cpp):
/// `max` bounds per symbol and `a <= b` constraints, each with the condition
/// it came from.
struct Limits {
  std::map<std::string, std::pair<int64_t, std::string>> max; // symbol -> (bound, why)
  std::vector<std::string> constraints, reasons;
};
Limits referenceLimits(const std::vector<ir::Obligation> &obligations, const std::vector<std::string> &symbols);

std::string dimsText(const ir::Shape &s); // "[seq, batch, 16]"

} // namespace shardproof::spec::draft
