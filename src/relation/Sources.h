// Internal: Python source sites of failures (Sources.cpp).
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/relation/Verifier.h"

#include <vector>

namespace shardproof::relation {

/// Fills each failure's Python sites: the reference node's line, then the
/// rank nodes' (Sources.cpp).
void attachSources(const ir::Graph &ref, const std::vector<ir::Graph> &ranks, std::vector<Failure> &failures);

} // namespace shardproof::relation
