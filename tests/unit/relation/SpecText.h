// A spec parsed from YAML text in a gtest (apart from GraphBuilder.h, which
// the fuzzers include without gtest).
#pragma once

#include "shardproof/spec/Spec.h"

#include <gtest/gtest.h>

#include <string>

namespace shardproof::testing {

/// A spec from YAML text; a spec that does not parse fails the test (and an
/// empty spec is returned).
inline spec::Spec parseSpecText(const std::string &yaml, const std::string &file = "test.yaml") {
  auto s = spec::parseSpec(yaml, file);
  EXPECT_TRUE(static_cast<bool>(s)) << (s ? "" : shardproof::toString(s.takeError()));
  return s ? *s : spec::Spec{};
}

} // namespace shardproof::testing
