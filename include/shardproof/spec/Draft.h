// `shardproof init`: a first spec drafted from the graphs alone. Every
// reference input and output gets a placement guessed from shapes (and from
// values where both sides have initializers), each with a comment saying what
// it was inferred from; what cannot be guessed is written as TODO, which the
// spec loader rejects until a person decides.
#pragma once

#include "shardproof/ir/Graph.h"

#include <string>
#include <vector>

namespace shardproof::spec {

struct DraftInput {
  const ir::Graph *reference = nullptr;
  std::vector<const ir::Graph *> ranks;
  /// As the spec will name them (relative to the spec's directory); `ranks`
  /// is a `{r}` pattern when one fits every rank path, else one per rank.
  std::string referencePath;
  std::vector<std::string> rankPaths;
};

struct Draft {
  std::string yaml;
  unsigned todos = 0;   // placements left as TODO
  unsigned guesses = 0; // placements guessed
};

Draft draftSpec(const DraftInput &in);

} // namespace shardproof::spec
