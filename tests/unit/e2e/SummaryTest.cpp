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

namespace {

// shardproof diff OLD NEW: a review of two relation files of one model.
std::string inferTo(const std::string &exampleName, const fs::path &out) {
  auto r = runShardproof("infer --quiet " + example(exampleName) + " -o " + out.string());
  EXPECT_EQ(r.exitCode, 0) << r.out;
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Diff, AChangedShardAxisIsListedOldToNewWithExit5) {
  fs::path a = tempPath("a.relations.yaml"), b = tempPath("b.relations.yaml"), md = tempPath("diff.md");
  std::string text = inferTo("mlp_tp2.yaml", a);
  std::string from = "/fc1/MatMul_output_0@1, axis=2)", to = "/fc1/MatMul_output_0@1, axis=1)";
  auto at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, from.size(), to);
  std::ofstream(b) << text;
  auto r = runShardproof("diff " + a.string() + " " + b.string() + " --summary-md " + md.string());
  EXPECT_EQ(r.exitCode, 5) << r.out;
  EXPECT_NE(r.out.find("1 changed, 0 added, 0 removed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("old: matched concat(/fc1/MatMul_output_0@0, /fc1/MatMul_output_0@1, axis=2)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("new: matched concat(/fc1/MatMul_output_0@0, /fc1/MatMul_output_0@1, axis=1)"),
            std::string::npos)
      << r.out;
  std::string m = readAndRemove(md);
  EXPECT_NE(m.find("## shardproof diff: RELATIONS CHANGED"), std::string::npos) << m;
  EXPECT_NE(m.find("**fc1**"), std::string::npos) << m;
  auto same = runShardproof("diff " + a.string() + " " + a.string());
  EXPECT_EQ(same.exitCode, 0) << same.out;
  fs::remove(a);
  fs::remove(b);
}

TEST(Diff, FilesOfTwoModelsOrATruncatedFileAreBadInput) {
  fs::path a = tempPath("mlp.relations.yaml"), c = tempPath("gpt.relations.yaml"), t = tempPath("cut.yaml");
  std::string text = inferTo("mlp_tp2.yaml", a);
  inferTo("gpt8h_tp8.yaml", c);
  auto other = runShardproof("diff " + a.string() + " " + c.string());
  EXPECT_EQ(other.exitCode, 3) << other.out;
  EXPECT_NE(other.out.find("they record different models"), std::string::npos) << other.out;
  std::ofstream(t) << text.substr(0, text.size() / 2 + 7);
  auto cut = runShardproof("diff " + a.string() + " " + t.string());
  EXPECT_EQ(cut.exitCode, 3) << cut.out;
  EXPECT_NE(cut.out.find(t.string() + ":"), std::string::npos) << "the error names the file: " << cut.out;
  for (auto &p : {a, c, t})
    fs::remove(p);
}

} // namespace
