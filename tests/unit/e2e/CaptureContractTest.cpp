// What the torch 2 capture (python/shardproof/capture) writes into a graph
// and the check must honour: the group each collective runs over, and the
// sizes the graph was captured for (torch.export specializes 0 and 1).
#include "HostileFixture.h"

#include <gtest/gtest.h>

using namespace shardproof::testing::hostile;

namespace {

// y = Relu(AllReduce(x)) on each rank, over the ranks `group` lists.
Model reduceOver(const std::vector<int64_t> &group, int64_t groupSize) {
  Model m;
  m.opset("com.microsoft", 1);
  m.input("x", {"n"}).output("y", {"n"});
  auto &n = m.node("/c/AllReduce", "AllReduce", {"x"}, {"c"}, "com.microsoft");
  auto *size = n.add_attribute();
  size->set_name("group_size");
  size->set_type(onnx::AttributeProto::INT);
  size->set_i(groupSize);
  auto *ranks = n.add_attribute();
  ranks->set_name("group_ranks");
  ranks->set_type(onnx::AttributeProto::INTS);
  for (int64_t r : group)
    ranks->add_ints(r);
  m.node("/act/Relu", "Relu", {"c"}, {"y"});
  return m;
}

// `m` with the model metadata the capture writes: shardproof.size_min or .assume.
Model withMetadata(Model m, const std::string &key, const std::string &value) {
  auto *p = m.m.add_metadata_props();
  p->set_key("shardproof." + key);
  p->set_value(value);
  return m;
}

Model capturedFrom(const Model &m, const std::string &sizes) { return withMetadata(m, "size_min", sizes); }
Model capturedUnder(const Model &m, const std::string &guard) { return withMetadata(m, "assume", guard); }

class CaptureContract : public Hostile {
protected:
  // `shardproof init` on the three models: the drafted spec's text.
  std::string draft() {
    auto r = run("init " + path("ref.onnx") + " --ranks '" + path("rank{r}.onnx") + "' --world-size 2 -o " +
                 path("drafted.yaml"));
    EXPECT_EQ(r.exitCode, 0) << r.out;
    return read("drafted.yaml");
  }
};

} // namespace

// A reduction over one rank of two (a TP group inside a DP replica) read as
// a reduction over the world would be a wrong graph: UNKNOWN, naming the group.
TEST_F(CaptureContract, AReductionOverASubGroupIsUnknownNamingTheGroup) {
  auto rank = reduceOver({0}, 1);
  models(rank, rank);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_SAYS(r, "runs over a group of 1 of the 2 ranks");
}

TEST_F(CaptureContract, TheWorldInAnotherRankOrderIsUnknownNamingTheRanks) {
  auto rank = reduceOver({1, 0}, 2);
  models(rank, rank);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_SAYS(r, "runs over the group of ranks [1, 0] of the 2 ranks");
}

TEST_F(CaptureContract, TheWorldInRankOrderIsReadAsBefore) {
  // A sum over the ranks of a replicated x is 2x, not the reference's x.
  auto rank = reduceOver({0, 1}, 2);
  models(rank, rank);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 1) << r.out;
}

// torch.export's graphs say nothing about sizes 0 and 1: a spec admitting
// n = 1 would claim a size no graph was captured for.
TEST_F(CaptureContract, ASpecAdmittingASizeBelowTheCaptureIsBadInput) {
  auto g = capturedFrom(relu(), "n=2");
  models(g, g, g);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "the spec admits 'n' (" + path("ref.onnx") + ", input 'x' axis 0) below 2");
  EXPECT_SAYS(r, "raise the symbol's min to 2");
}

TEST_F(CaptureContract, ASpecWithinTheCapturedSizesIsChecked) {
  auto g = capturedFrom(relu(), "n=2");
  models(g, g, g);
  auto r = checkWith("  n: {min: 1}\n", "  n: {min: 2}\n");
  EXPECT_EQ(r.exitCode, 0) << r.out;
}

TEST_F(CaptureContract, MalformedCapturedSizesAreBadInput) {
  auto g = capturedFrom(relu(), "n=two");
  models(g, g, g);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "metadata shardproof.size_min has 'n=two'; expected name=N");
}

TEST_F(CaptureContract, InitDraftsTheCapturedMinimum) {
  auto g = capturedFrom(relu(), "n=2");
  models(g, g, g);
  std::string drafted = draft();
  EXPECT_NE(drafted.find("n: {min: 2}  # captured by torch.export"), std::string::npos) << drafted;
}

// torch traced the graph assuming n != 3 (a guard it could not prove for
// every size): a spec admitting n = 3 claims what the graph does not say.
TEST_F(CaptureContract, ASpecAdmittingSizesOutsideTheCapturedGuardIsBadInput) {
  auto g = capturedUnder(relu(), "(n != 3)");
  models(g, g, g);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "was not captured: torch traced it under `(n != 3)`; add that to the spec's constraints");
}

TEST_F(CaptureContract, ASpecKeepingToTheCapturedGuardIsChecked) {
  auto g = capturedUnder(relu(), "(n != 3)");
  models(g, g, g);
  auto r = run("check " + write("s.yaml", spec("constraints: [\"n != 3\"]\n")));
  EXPECT_EQ(r.exitCode, 0) << r.out;
}

TEST_F(CaptureContract, AMalformedCapturedGuardIsBadInput) {
  auto g = capturedUnder(relu(), "n !=");
  models(g, g, g);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "metadata shardproof.assume");
}

TEST_F(CaptureContract, InitDraftsTheCapturedGuardAsAConstraint) {
  auto g = capturedUnder(relu(), "(n != 3)");
  models(g, g, g);
  std::string drafted = draft();
  EXPECT_NE(drafted.find("- \"(n != 3)\"  # torch.export traced"), std::string::npos) << drafted;
  EXPECT_EQ(run("check " + path("drafted.yaml")).exitCode, 0) << drafted;
}
