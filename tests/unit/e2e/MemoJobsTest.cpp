// Reuse and threads must not change a result: every shipped example gives the
// same report on one thread and on two (`--jobs`), and the same verdict when
// nothing is reused (`--no-memo`: no solver result cache, no obligation
// deduplication, no entailment cache).
#include "Run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

using shardproof::testing::runShardproof;

namespace {

std::vector<std::string> exampleSpecs() {
  std::vector<std::string> out;
  for (auto &e : std::filesystem::directory_iterator(std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples"))
    if (e.path().extension() == ".yaml")
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

class EveryExample : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryExample, SameReportOnTwoThreadsAndSameVerdictWithoutMemoization) {
  std::string spec = std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples/" + GetParam();
  auto one = runShardproof("check --jobs 1 " + spec);
  auto two = runShardproof("check --jobs 2 " + spec);
  EXPECT_EQ(two.exitCode, one.exitCode);
  EXPECT_EQ(two.out, one.out) << "the report depends on the thread count";
  auto memo = runShardproof("check -q " + spec);
  auto noMemo = runShardproof("check -q --no-memo " + spec);
  EXPECT_EQ(noMemo.exitCode, memo.exitCode);
  EXPECT_EQ(firstLine(noMemo.out), firstLine(memo.out)) << "memoization changed the verdict";
  EXPECT_EQ(memo.exitCode, one.exitCode);
}

INSTANTIATE_TEST_SUITE_P(Examples, EveryExample, ::testing::ValuesIn(exampleSpecs()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           std::string n = i.param.substr(0, i.param.size() - 5);
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });

TEST(Jobs, ZeroThreadsIsAUserError) {
  auto r = runShardproof("check --jobs 0 " + std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples/mlp_tp2.yaml");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.out.find("--jobs"), std::string::npos) << r.out;
}

} // namespace
