// Internal: check --sample (Sample.cpp), a second opinion beside the proof.
#pragma once

#include "Core.h"
#include "RankSides.h"

#include <vector>

namespace shardproof::relation {

/// Executes the reference graph and the rank side of every output at random
/// admissible sizes and compares them element by element.
SampleResult sampleOutputs(CheckCore &core, const std::vector<ValueInfo> &refValues, RankSides sides);

} // namespace shardproof::relation
