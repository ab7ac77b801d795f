// Localization (issue 17): under REFUTED the report names where the
// implementation departs from the reference, not a reference node that has no
// relation in the correct variant too. The fixtures are the shipped
// vocab-parallel cross-entropy (lmhead_ce_tp2) with the target-logit pick moved
// into a module only the ranks have, as Megatron's _VocabParallelCrossEntropy
// is, then broken in one node.
#include "HostileFixture.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>

using namespace shardproof::testing::hostile;
using shardproof::testing::example;

namespace {

// The target-logit pick of the ranks (range mask, gather, masked logit and its
// all-reduce): what the reference does with one GatherElements.
bool inTargetPick(const onnx::NodeProto &n, const std::set<std::string> &maskedOutputs) {
  static const std::set<std::string> ops{"GreaterOrEqual", "Less", "Or", "Where", "Unsqueeze", "GatherElements",
                                         "Gather"};
  if (n.name().rfind("/ce/", 0) != 0)
    return false;
  if (ops.count(n.op_type()))
    return true;
  return n.op_type() == "AllReduce" && n.input_size() == 1 && maskedOutputs.count(n.input(0));
}

class Localization : public Hostile {
protected:
  // Rank graphs of example `ranks` ("..._rank{r}.onnx") with the target-logit
  // pick renamed into module ce.vocab_parallel, `edit` applied to every node,
  // and the spec of lmhead_ce_tp2 over them.
  std::string fixture(const std::string &ranks, const std::function<void(onnx::NodeProto &)> &edit = {}) {
    for (int r = 0; r < 2; ++r) {
      std::string from = ranks;
      from.replace(from.find("{r}"), 3, std::to_string(r));
      onnx::ModelProto m;
      std::ifstream in(example(from), std::ios::binary);
      EXPECT_TRUE(m.ParseFromIstream(&in)) << from;
      std::set<std::string> masked; // outputs of Where nodes
      for (auto &n : m.graph().node())
        if (n.op_type() == "Where")
          masked.insert(n.output(0));
      for (auto &n : *m.mutable_graph()->mutable_node()) {
        if (inTargetPick(n, masked))
          n.set_name("/ce/vocab_parallel/" + n.name().substr(4));
        if (edit)
          edit(n);
      }
      write("rank" + std::to_string(r) + ".onnx", m.SerializeAsString());
    }
    std::ifstream ref(example("lmhead_ref.onnx"), std::ios::binary);
    std::ostringstream bytes;
    bytes << ref.rdbuf();
    write("ref.onnx", bytes.str());
    return write("s.yaml", "shardproof: 1\n"
                           "reference: ref.onnx\n"
                           "implementation:\n"
                           "  world_size: 2\n"
                           "  ranks: rank{r}.onnx\n"
                           "symbols:\n"
                           "  batch: {min: 1}\n"
                           "  seq: {min: 1}\n"
                           "inputs:\n"
                           "  h: replicated\n"
                           "  target: {replicated: true, values: {min: 0, max: 9}}\n"
                           "  lm_head.weight: {shard: 1, split: even}\n"
                           "outputs:\n"
                           "  loss: replicated\n");
  }
};

// The target logit's all-reduce takes the max instead of the sum: the logit
// (shifted by the row max, so <= 0) of the rank owning the target loses to
// the other rank's 0.
void maxAllReduce(onnx::NodeProto &n) {
  if (n.name() != "/ce/vocab_parallel/AllReduce_1")
    return;
  n.set_domain("shardproof");
  auto *a = n.add_attribute();
  a->set_name("op");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("max");
}

} // namespace

// The premise: correct, the fixture is VERIFIED while /ce/LogSoftmax has no
// relation (the ranks compute it as max, exp-sum and log).
TEST_F(Localization, TheCorrectVariantHasABenignUnmatchedLogSoftmax) {
  auto r = run("check " + fixture("lmhead_ce_tp2_rank{r}.onnx"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_SAYS(r, "LogSoftmax_output_0' of '/ce/LogSoftmax' (LogSoftmax); the element below has no counterpart on any "
                 "rank (outputs proven regardless)");
}

// (a) A bug in the rank-only module: the headline names its collective, not
// /ce/LogSoftmax, which is unmatched in the correct variant too.
TEST_F(Localization, ABugInARankOnlyModuleIsNamedThere) {
  std::string spec = fixture("lmhead_ce_tp2_rank{r}.onnx", maxAllReduce);
  auto r = run("check " + spec);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_SAYS(r, "REFUTED at module ce.vocab_parallel: output 'loss' on rank 0 differs from the reference; it departs "
                 "from the reference at rank 0 node /ce/vocab_parallel/AllReduce_1 (AllReduce) in module "
                 "ce.vocab_parallel, which only the ranks have");
  EXPECT_SAYS(r, "rank nodes nearby: rank 0: /ce/vocab_parallel/AllReduce_1 (AllReduce);");
  // The reference node without a relation is still listed, after it.
  EXPECT_SAYS(r, "- rank tensors compute only part of reference tensor '/ce/LogSoftmax_output_0'");
  // The same blame in --json and SARIF: the first failure and result.
  auto j = run("check " + spec + " --json " + path("r.json") + " --sarif " + path("r.sarif"));
  EXPECT_EQ(j.exitCode, 1) << j.out;
  std::string json = read("r.json"), sarif = read("r.sarif");
  size_t mismatch = json.find("output-mismatch"), noRel = json.find("no-relation");
  ASSERT_NE(mismatch, std::string::npos) << json;
  EXPECT_LT(mismatch, noRel) << json;
  EXPECT_NE(json.find("\"ce.vocab_parallel\""), std::string::npos) << json;
  EXPECT_NE(json.find("rank 0: /ce/vocab_parallel/AllReduce_1 (AllReduce)"), std::string::npos) << json;
  EXPECT_NE(sarif.find("/ce/vocab_parallel/AllReduce_1"), std::string::npos) << sarif;
}

// A bug upstream of the rank-only module (each rank subtracts its own row
// max): the departure is that subtraction in module ce, and the headline stays
// the reference's LogSoftmax, the node the ranks compute differently.
TEST_F(Localization, ARankOnlyModuleDownstreamOfTheBugIsNotBlamed) {
  auto r = run("check " + fixture("lmhead_ce_no_max_allreduce_tp2_rank{r}.onnx"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_SAYS(r, "REFUTED at module ce (reference node /ce/LogSoftmax, LogSoftmax)");
  EXPECT_SAYS(r, "- output 'loss' on rank 0 differs from the reference; it departs from the reference at rank 0 node "
                 "/ce/Sub (Sub) in module ce:");
  EXPECT_EQ(r.out.find("which only the ranks have"), std::string::npos) << r.out;
}

// (b) The shipped example keeps its headline, and its output mismatch names
// the subtraction of the rank's own max.
TEST_F(Localization, TheShippedMissingMaxAllReduceKeepsItsHeadline) {
  auto r = run("check " + example("lmhead_ce_no_max_allreduce_tp2.yaml"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_SAYS(r, "REFUTED at module ce (reference node /ce/LogSoftmax, LogSoftmax)");
  EXPECT_SAYS(r, "it departs from the reference at rank 0 node /ce/Sub (Sub) in module ce: of the ");
}
