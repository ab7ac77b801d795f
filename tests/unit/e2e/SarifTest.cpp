// check --sarif through the real binary: a refuted example yields one error
// result per failure at the spec line placing the failing tensor, with the replayed counterexample in the
// message; a verified one yields a valid log with no results; an output in a
// missing directory is bad input (exit 3) and nothing is written.
#include "Run.h"

#include <gtest/gtest.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

using shardproof::testing::example;
using shardproof::testing::runShardproof;
namespace fs = std::filesystem;
namespace json = llvm::json;

namespace {

fs::path tempPath(const std::string &name) {
  return fs::path(::testing::TempDir()) / ("shardproof-sarif-" + std::to_string(::getpid()) + "-" + name);
}

// A missing string field reads as "<missing>", so a failed comparison says so.
std::string str(llvm::Optional<llvm::StringRef> s) { return s ? s->str() : "<missing>"; }

json::Value readJson(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  auto v = json::parse(ss.str());
  if (!v) {
    ADD_FAILURE() << llvm::toString(v.takeError());
    return nullptr;
  }
  return std::move(*v);
}

TEST(Sarif, MissingAllReduceIsAnErrorOnTheSpecWithTheReplayedNumbers) {
  fs::path out = tempPath("bad.sarif");
  auto r = runShardproof("check --witness " + example("mlp_no_allreduce.yaml") + " --sarif " + out.string());
  ASSERT_EQ(r.exitCode, 1) << r.out;
  json::Value v = readJson(out);
  fs::remove(out);
  auto *top = v.getAsObject();
  ASSERT_TRUE(top);
  EXPECT_EQ(str(top->getString("version")), "2.1.0");
  auto *runs = top->getArray("runs");
  ASSERT_TRUE(runs && runs->size() == 1);
  auto *run = (*runs)[0].getAsObject();
  EXPECT_EQ(str(run->getObject("tool")->getObject("driver")->getString("name")), "shardproof");
  auto *results = run->getArray("results");
  ASSERT_TRUE(results && !results->empty());
  bool namesFc2 = false, hasReplay = false;
  for (auto &res : *results) {
    auto *o = res.getAsObject();
    EXPECT_EQ(str(o->getString("level")), "error");
    std::string uri = str((*o->getArray("locations"))[0].getAsObject()->getObject("physicalLocation")
                   ->getObject("artifactLocation")->getString("uri"));
    EXPECT_EQ(uri, example("mlp_no_allreduce.yaml"));
    // The annotation sits on the spec line that places y (`  y: replicated`).
    auto *region = (*o->getArray("locations"))[0].getAsObject()->getObject("physicalLocation")->getObject("region");
    EXPECT_EQ(region->getInteger("startLine").value_or(0), 20);
    EXPECT_EQ(region->getInteger("startColumn").value_or(0), 6);
    std::string text = str(o->getObject("message")->getString("text"));
    namesFc2 |= text.find("module fc2") != std::string::npos;
    hasReplay |= text.find("confirmed by replay") != std::string::npos;
  }
  EXPECT_TRUE(namesFc2) << "no result names the module whose reduction is missing";
  EXPECT_TRUE(hasReplay) << "no result carries the replayed counterexample";
}

// Rule ids of a log's results, and the message of the first result per id.
std::map<std::string, std::string> ruleMessages(const json::Value &v) {
  std::map<std::string, std::string> out;
  auto *run = (*v.getAsObject()->getArray("runs"))[0].getAsObject();
  for (auto &res : *run->getArray("results")) {
    auto *o = res.getAsObject();
    out.emplace(str(o->getString("ruleId")), str(o->getObject("message")->getString("text")));
  }
  return out;
}

json::Value sarifOf(const std::string &spec, int wantExit) {
  fs::path out = tempPath(spec + ".sarif");
  auto r = runShardproof("check --quiet " + example(spec) + " --sarif " + out.string());
  EXPECT_EQ(r.exitCode, wantExit) << r.out;
  json::Value v = readJson(out);
  fs::remove(out);
  return v;
}

TEST(Sarif, AMissingAllReduceIsFiledAsAMissingReduction) {
  auto rules = ruleMessages(sarifOf("mlp_no_allreduce.yaml", 1));
  ASSERT_TRUE(rules.count("SP007")) << "no MissingReduction result";
  EXPECT_NE(rules["SP007"].find("reduction is missing"), std::string::npos) << rules["SP007"];
}

TEST(Sarif, AWrongSliceOffsetIsFiledAsUncoveredElements) {
  auto rules = ruleMessages(sarifOf("mlp_offbyone_tp2.yaml", 1));
  EXPECT_TRUE(rules.count("SP008")) << "no UncoveredElements result";
  EXPECT_FALSE(rules.count("SP009")) << "an off-by-one slice is not a mask leak";
}

// pad_pool_leak averages over every padded row: changing only the pad rows
// (which no reference input reads) changes the output, which is what makes it
// a mask leak rather than any wrong number.
TEST(Sarif, PaddedRowsInAMeanAreFiledAsAMaskLeak) {
  json::Value v = sarifOf("pad_pool_leak.yaml", 1);
  auto rules = ruleMessages(v);
  ASSERT_TRUE(rules.count("SP009")) << "no MaskLeak result";
  EXPECT_NE(rules["SP009"].find("padding"), std::string::npos) << rules["SP009"];
  bool declared = false;
  auto *driver = (*v.getAsObject()->getArray("runs"))[0].getAsObject()->getObject("tool")->getObject("driver");
  for (auto &rule : *driver->getArray("rules"))
    declared |= str(rule.getAsObject()->getString("id")) == "SP009";
  EXPECT_TRUE(declared) << "SP009 is used but not declared in the driver's rules";
}

TEST(Sarif, VerifiedExampleHasNoResults) {
  fs::path out = tempPath("ok.sarif");
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --sarif " + out.string());
  ASSERT_EQ(r.exitCode, 0) << r.out;
  json::Value v = readJson(out);
  fs::remove(out);
  auto *runs = v.getAsObject()->getArray("runs");
  ASSERT_TRUE(runs && runs->size() == 1);
  EXPECT_TRUE((*runs)[0].getAsObject()->getArray("results")->empty());
}

TEST(Sarif, UnknownRunHasOnlyWarnings) {
  // pad_attn_finite is UNKNOWN (masked columns are tiny, not zero): nothing in
  // it was shown wrong, so no result may claim the level of a refutation.
  fs::path out = tempPath("unknown.sarif");
  auto r = runShardproof("check --quiet " + example("pad_attn_finite.yaml") + " --sarif " + out.string());
  ASSERT_EQ(r.exitCode, 2) << r.out;
  json::Value v = readJson(out);
  fs::remove(out);
  auto *results = (*v.getAsObject()->getArray("runs"))[0].getAsObject()->getArray("results");
  ASSERT_TRUE(results && !results->empty());
  for (auto &res : *results)
    EXPECT_EQ(str(res.getAsObject()->getString("level")), "warning");
}

TEST(Sarif, ChangedRelationIsFlaggedAtItsLineInTheRelationFile) {
  fs::path rel = tempPath("mlp.relations.yaml"), out = tempPath("changed.sarif");
  auto inf = runShardproof("infer --quiet " + example("mlp_tp2.yaml") + " -o " + rel.string());
  ASSERT_EQ(inf.exitCode, 0) << inf.out;
  // Hand-edit fc1's recorded shard axis: the fresh check must disagree with it.
  std::ifstream in(rel);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::string from = "/fc1/MatMul_output_0@1, axis=2)", to = "/fc1/MatMul_output_0@1, axis=1)";
  auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), to);
  int line = 1 + std::count(text.begin(), text.begin() + at, '\n');
  std::ofstream(rel) << text;
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --relations " + rel.string() +
                         " --sarif " + out.string());
  EXPECT_EQ(r.exitCode, 5) << r.out;
  json::Value v = readJson(out);
  fs::remove(out);
  fs::remove(rel);
  auto *results = (*v.getAsObject()->getArray("runs"))[0].getAsObject()->getArray("results");
  ASSERT_TRUE(results && results->size() == 1);
  auto *o = (*results)[0].getAsObject();
  EXPECT_EQ(str(o->getString("ruleId")), "SP006");
  auto *loc = (*o->getArray("locations"))[0].getAsObject()->getObject("physicalLocation");
  EXPECT_EQ(str(loc->getObject("artifactLocation")->getString("uri")), rel.string());
  EXPECT_EQ(loc->getObject("region")->getInteger("startLine").value_or(0), line);
  std::string msg = str(o->getObject("message")->getString("text"));
  EXPECT_NE(msg.find("(module fc1) changed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis=1) -> matched"), std::string::npos) << msg;
}

TEST(Sarif, OutputInAMissingDirectoryIsBadInputAndWritesNothing) {
  fs::path dir = tempPath("no-such-dir");
  auto r = runShardproof("check --quiet " + example("mlp_tp2.yaml") + " --sarif " + (dir / "x.sarif").string());
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir));
}

} // namespace
