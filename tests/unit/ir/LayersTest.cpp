// findLayerStack: which layers of a graph are the layer below again, node for
// node (what the rank world's whole-layer copy rests on, LayerCopy.h).
#include "shardproof/ir/Layers.h"

#include <gtest/gtest.h>

using namespace shardproof::ir;

namespace {

struct Builder {
  Graph g;
  int value(const std::string &name) {
    g.values.push_back({});
    g.values.back().name = name;
    return static_cast<int>(g.values.size()) - 1;
  }
  int source(const std::string &name) {
    int v = value(name);
    g.inputs.push_back(v);
    return v;
  }
  int node(const std::string &name, const std::string &op, std::vector<int> ins, int64_t attr = 0) {
    int out = value(name + "_output_0");
    Node n;
    n.name = name;
    n.opType = op;
    n.inputs = std::move(ins);
    n.outputs = {out};
    if (attr) {
      Attribute a;
      a.kind = Attribute::Kind::Int;
      a.i = attr;
      n.attrs["axis"] = a;
    }
    g.values[out].producer = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(n));
    return out;
  }
  int constant(const std::string &name, double v) {
    int out = node(name, "Constant", {});
    auto t = std::make_shared<TensorData>();
    t->floats = {v};
    Attribute a;
    a.kind = Attribute::Kind::Tensor;
    a.tensor = t;
    g.nodes.back().attrs["value"] = a;
    return out;
  }
  // Layer k: h' = h + relu(h @ W_k) * c, reading the stem's tensor `shared`.
  int layer(int k, int h, int shared, int64_t axis = 1) {
    std::string p = "/layers." + std::to_string(k) + "/";
    int w = source("layers." + std::to_string(k) + ".w");
    int c = constant(p + "Constant", 2.0);
    int mm = node(p + "MatMul", "MatMul", {h, w});
    int act = node(p + "Relu", "Relu", {mm}, axis);
    int sc = node(p + "Mul", "Mul", {act, c});
    int sh = node(p + "Add_1", "Add", {sc, shared});
    return node(p + "Add", "Add", {h, sh});
  }
};

} // namespace

TEST(LayerStack, IdenticalLayersRepeatFromTheThirdOn) {
  Builder b;
  int x = b.source("x");
  int shared = b.node("/embed/Neg", "Neg", {x});
  int h = shared;
  for (int k = 0; k < 4; ++k)
    h = b.layer(k, h, shared);
  b.node("/head/Relu", "Relu", {h});
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_EQ(s.container, "layers");
  EXPECT_EQ(s.size(1), 5u) << "the Constant node is not part of the body";
  EXPECT_FALSE(s.repeats[1]) << "layer 1 reads layer 0, which reads the stem: no shift";
  EXPECT_TRUE(s.repeats[2]);
  EXPECT_TRUE(s.repeats[3]);
}

TEST(LayerStack, ALayerWithAnotherAttributeDoesNotRepeat) {
  Builder b;
  int x = b.source("x");
  int h = x;
  for (int k = 0; k < 4; ++k)
    h = b.layer(k, h, x, k == 3 ? 2 : 1);
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_TRUE(s.repeats[2]);
  EXPECT_FALSE(s.repeats[3]);
}

// Layer 3's Mul reads the MatMul instead of the Relu: the same operators in
// the same order, one edge inside the layer rewired.
TEST(LayerStack, ALayerWithOneEdgeRewiredDoesNotRepeat) {
  Builder b;
  int x = b.source("x");
  int h = x;
  for (int k = 0; k < 4; ++k)
    h = b.layer(k, h, x);
  for (Node &n : b.g.nodes)
    if (n.name == "/layers.3/Mul")
      n.inputs[0] = b.g.nodes[b.g.values[n.inputs[0]].producer].inputs[0];
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_TRUE(s.repeats[2]);
  EXPECT_FALSE(s.repeats[3]);
}

// Reading a lower layer's output that the layer below also read is reading a
// shared tensor (as every layer reads the rotary table layer 0 made): the
// copy then reads it too, which is what the graph computes. A wrong wire is
// found by the reference walk, not here.
TEST(LayerStack, ALayerReadingWhatTheLayerBelowReadIsAShiftWithASharedInput) {
  Builder b;
  int x = b.source("x");
  std::vector<int> outs{x};
  for (int k = 0; k < 4; ++k)
    outs.push_back(b.layer(k, k == 3 ? outs[2] : outs.back(), x));
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_TRUE(s.repeats[3]);
}

TEST(LayerStack, InterleavedLayersAreNoStack) {
  Builder b;
  int x = b.source("x");
  b.node("/layers.0/Relu", "Relu", {x});
  b.node("/layers.1/Relu", "Relu", {x});
  b.node("/layers.0/Neg", "Neg", {x});
  EXPECT_EQ(findLayerStack(b.g).layers(), 0);
}

TEST(LayerStack, ExportersSharedConstantsMayFallInAnyLayer) {
  Builder b;
  int x = b.source("x");
  int h = x;
  for (int k = 0; k < 4; ++k) {
    if (k == 2)
      b.constant("/layers.0/Constant_9", 1.0); // named for layer 0, placed in layer 2
    h = b.layer(k, h, x);
  }
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_TRUE(s.repeats[2]);
  EXPECT_TRUE(s.repeats[3]);
}

TEST(LayerStack, LayerNumberReadsTheFirstNumberedModule) {
  Node n;
  n.name = "/model/layers.12/experts.3/Mul";
  std::string container;
  EXPECT_EQ(layerNumber(n, &container), 12);
  EXPECT_EQ(container, "model.layers");
  n.name = "/lm_head/MatMul";
  EXPECT_EQ(layerNumber(n), -1);
  n.name = "Constant_75";
  EXPECT_EQ(layerNumber(n), -1);
}

// Once the first layer's name gives the container, a name is read by its
// start (460,000 of them at 126 layers). Names that start alike but are not
// that container's layer must still be passed over, as the full scan did.
TEST(LayerStack, NamesThatOnlyStartLikeTheContainerAreNotLayers) {
  Builder b;
  int x = b.source("x");
  int h = x;
  for (int k = 0; k < 3; ++k) {
    h = b.layer(k, h, x);
    if (k == 1) { // inside layer 1's span: none of these starts another layer
      b.node("/layers.x2/Neg", "Neg", {h});    // not a number
      b.node("/layers.3.5/Neg", "Neg", {h});   // another container: "/layers.3"
      b.node("/layers.1234567/Neg", "Neg", {h}); // more digits than a layer number has
      b.node("/layers.2", "Neg", {h});         // the op's own name, not a module
    }
  }
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 3);
  EXPECT_EQ(s.container, "layers");
  EXPECT_EQ(s.size(1), s.size(0) + 4) << "the four nodes belong to layer 1's span";
  EXPECT_FALSE(s.repeats[2]);
}

// Layer 3 names its two Neg nodes the other way round: its Add reads the Neg
// named like the one layer 2's Add reads, but at the other position. The
// whole-layer copy maps position to position, so by position is how the wires
// must be compared: by name, layer 3 would pass for a repeat and the copy
// would add the negated input where the graph adds the negated weight.
TEST(LayerStack, AWireInsideTheLayerIsComparedByPositionNotByName) {
  Builder b;
  int x = b.source("x");
  int h = x;
  for (int k = 0; k < 4; ++k) {
    std::string p = "/layers." + std::to_string(k) + "/";
    int w = b.source("layers." + std::to_string(k) + ".w");
    bool swapped = k == 3;
    int first = b.node(p + (swapped ? "Neg_1" : "Neg"), "Neg", {h});
    int second = b.node(p + (swapped ? "Neg" : "Neg_1"), "Neg", {w});
    h = b.node(p + "Add", "Add", {swapped ? second : first, h});
  }
  LayerStack s = findLayerStack(b.g);
  ASSERT_EQ(s.layers(), 4);
  EXPECT_TRUE(s.repeats[2]);
  EXPECT_FALSE(s.repeats[3]) << "layer 3's Add reads position 1, layer 2's position 0";
}
