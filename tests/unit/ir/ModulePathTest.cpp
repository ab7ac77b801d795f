// Node::inModule answers modulePath() == path without building the string;
// the search for rank nodes near a reference node without a relation asks it
// of every rank node (433,000 in the 405B-shaped forward).
#include "shardproof/ir/Graph.h"

#include <gtest/gtest.h>

using shardproof::ir::Node;

namespace {

Node named(const std::string &name) {
  Node n;
  n.name = name;
  return n;
}

} // namespace

TEST(ModulePath, InModuleAgreesWithTheBuiltPathOnEveryPair) {
  const std::vector<std::string> names{"/layers.0/mlp/fc2/MatMul", "/layers.0/mlp/MatMul", "/MatMul", "MatMul", "",
                                       "/a.b/c/Op",  "/a/b/c/Op",  "//x/Op", "/a//b/Op", "/layers.10/mlp/fc2/MatMul",
                                       "/layers.1/mlp/fc2/MatMul", "/a/"};
  std::vector<std::string> paths{"", "layers", "layers.0", "layers.0.mlp", "layers.0.mlp.fc", "layers.0.mlp.fc2.",
                                 "layers.1.mlp.fc2", "a.b.c", "a.b", "x", ".x", "a.b.c.d", "a"};
  for (auto &n : names)
    paths.push_back(named(n).modulePath());
  for (auto &n : names)
    for (auto &p : paths)
      EXPECT_EQ(named(n).inModule(p), named(n).modulePath() == p) << "'" << n << "' in '" << p << "'";
}

TEST(ModulePath, ALayerIsNotTheLayerWhoseNumberItStartsWith) {
  EXPECT_TRUE(named("/layers.10/mlp/fc2/MatMul").inModule("layers.10.mlp.fc2"));
  EXPECT_FALSE(named("/layers.10/mlp/fc2/MatMul").inModule("layers.1.mlp.fc2"));
  EXPECT_FALSE(named("/layers.1/mlp/fc2/MatMul").inModule("layers.10.mlp.fc2"));
}
