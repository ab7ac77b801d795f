// check --summary-md through the real binary: the comment a pull request gets.
// A refuted example names the failing module and the replayed numbers; a
// verified one is one sentence; a changed relation is shown under its module,
// recorded -> now.
#include "Run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using shardproof::testing::example;
using shardproof::testing::runShardproof;
namespace fs = std::filesystem;

namespace {

fs::path tempPath(const std::string &name) {
  return fs::path(::testing::TempDir()) / ("shardproof-summary-" + std::to_string(::getpid()) + "-" + name);
}

std::string readAndRemove(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(p);
  return ss.str();
}

TEST(SummaryMd, MissingAllReduceNamesTheModuleAndTheReplayedNumbers) {
  fs::path out = tempPath("bad.md");
  auto r = runShardproof("check --quiet " + example("mlp_no_allreduce.yaml") + " --summary-md " + out.string());
  ASSERT_EQ(r.exitCode, 1) << r.out;
  std::string md = readAndRemove(out);
  EXPECT_EQ(md.rfind("## shardproof: REFUTED\n", 0), 0u) << md;
  EXPECT_NE(md.find("### First failing node"), std::string::npos) << md;
  EXPECT_NE(md.find("- module `fc2`"), std::string::npos) << md;
  EXPECT_NE(md.find("(confirmed)"), std::string::npos) << md;
  EXPECT_NE(md.find("| `y` | REFUTED |"), std::string::npos) << md;
}

TEST(SummaryMd, VerifiedRunIsOneSentence) {
  fs::path out = tempPath("good.md");
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --summary-md " + out.string());
  ASSERT_EQ(r.exitCode, 0) << r.out;
  std::string md = readAndRemove(out);
  EXPECT_EQ(md.rfind("## shardproof: VERIFIED\n", 0), 0u) << md;
  EXPECT_NE(md.find("outputs are rebuilt from the ranks' outputs for every admissible size."), std::string::npos);
  EXPECT_EQ(md.find("###"), std::string::npos) << "a clean run has no sections: " << md;
}

TEST(SummaryMd, ChangedRelationIsListedUnderItsModule) {
  fs::path rel = tempPath("mlp.relations.yaml"), out = tempPath("changed.md");
  auto inf = runShardproof("infer --quiet " + example("mlp_tp2.yaml") + " -o " + rel.string());
  ASSERT_EQ(inf.exitCode, 0) << inf.out;
  std::string text = readAndRemove(rel);
  std::string from = "/fc1/MatMul_output_0@1, axis=2)", to = "/fc1/MatMul_output_0@1, axis=1)";
  auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), to);
  std::ofstream(rel) << text;
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --relations " + rel.string() +
                         " --summary-md " + out.string());
  EXPECT_EQ(r.exitCode, 5) << r.out;
  fs::remove(rel);
  std::string md = readAndRemove(out);
  EXPECT_NE(md.find("### Relations changed: 1 changed, 0 added, 0 removed"), std::string::npos) << md;
  EXPECT_NE(md.find("**fc1**"), std::string::npos) << md;
  EXPECT_NE(md.find("axis=1)` | matched `concat("), std::string::npos) << md;
}

TEST(SummaryMd, OutputInAMissingDirectoryIsBadInputAndWritesNothing) {
  fs::path out = tempPath("no-such-dir") / "pr.md";
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --summary-md " + out.string());
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

} // namespace
