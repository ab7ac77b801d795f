// Trust: inputs that once crashed shardproof or gave a wrong verdict (issue
// 17), each now a clear error (exit 3) or the right verdict.
#include "HostileFixture.h"

#include <gtest/gtest.h>

using namespace shardproof::testing::hostile;

namespace {

// y = Relu(collective(x)) on each rank, the collective given by `edit`.
Model withCollective(const std::string &domain, const std::string &op,
                     const std::function<void(onnx::NodeProto &)> &edit) {
  Model m;
  m.opset(domain, 1);
  m.input("x", {"n"}).output("y", {"n"});
  auto &n = m.node("/c/" + op, op, {"x"}, {"c"}, domain);
  edit(n);
  m.node("/act/Relu", "Relu", {"c"}, {"y"});
  return m;
}

void intAttr(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void stringAttr(onnx::NodeProto &n, const std::string &name, const std::string &v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

} // namespace

// Was: SIGSEGV in relation/Ranks.cpp (axis 5 of a 1-D tensor), a Z3
// assertion (axis -5).
TEST_F(Hostile, CollectiveAxisOutOfRangeIsBadInputNotACrash) {
  for (int64_t axis : {5, -5}) {
    for (const char *op : {"AllGather", "ReduceScatter"}) {
      auto rank = withCollective("shardproof", op, [&](onnx::NodeProto &n) {
        intAttr(n, "axis", axis);
        intAttr(n, "group_size", 2);
      });
      models(rank, rank);
      auto r = run("check " + write("s.yaml", spec()));
      EXPECT_EQ(r.exitCode, 3) << op << " axis " << axis << "\n" << r.out;
      EXPECT_SAYS(r, "axis " + std::to_string(axis) + " is out of range for an input of rank 1");
    }
  }
  auto a2a = withCollective("shardproof", "AllToAll", [](onnx::NodeProto &n) {
    intAttr(n, "split_axis", 0);
    intAttr(n, "concat_axis", 3);
  });
  models(a2a, a2a);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "concat_axis 3 is out of range");
}

// Was: REFUTED, as if 'prod' were 'min'.
TEST_F(Hostile, UnknownAllReduceOpIsBadInputNotAVerdict) {
  auto rank = withCollective("shardproof", "AllReduce", [](onnx::NodeProto &n) { stringAttr(n, "op", "prod"); });
  models(rank, rank);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "reduction op 'prod' is not one of sum, max, min");
}

// Was: accepted, the extra input or attribute silently ignored.
TEST_F(Hostile, CollectiveWithAnExtraInputOrAttributeIsBadInput) {
  auto extraInput = withCollective("com.microsoft", "AllReduce", [](onnx::NodeProto &n) { n.add_input("x"); });
  models(extraInput, extraInput);
  auto r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "has 2 inputs and 1 outputs; a collective takes one tensor and gives one");
  auto extraAttr = withCollective("com.microsoft", "AllGather", [](onnx::NodeProto &n) {
    intAttr(n, "group_size", 2);
    intAttr(n, "dim", 0);
  });
  models(extraAttr, extraAttr);
  r = run("check " + write("s.yaml", spec()));
  EXPECT_EQ(r.exitCode, 3) << r.out;
  EXPECT_SAYS(r, "has attribute 'dim', which shardproof does not read (it reads: group_size, axis)");
}

// Was: VERIFIED after 90 s. The satisfiability check of the constraints timed
// out and was taken as "satisfiable"; had they been contradictory, the proof
// would have held vacuously. Undecided constraints are UNKNOWN.
TEST_F(Hostile, ConstraintsWhoseSatisfiabilityIsUndecidedAreUnknownNeverAVacuousProof) {
  models();
  auto r = checkWith("  n: {min: 1}\n",
                     "  n: {min: 1}\n  m: {min: 1}\n  k: {min: 1}\n"
                     "constraints: [\"n * n * n + m * m * m == 7 * 7 * 7 * n * m * k + 5\"]\n",
                     "--solver-timeout 300");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_SAYS(r, "could not decide that the spec's symbol bounds and constraints admit any size");
  EXPECT_SAYS(r, "a proof under them could hold vacuously");
}
