// The stack of repeated layers in a graph: the nodes of `layers.0`,
// `layers.1`, ... (any module container followed by a layer number), and
// which layers are their predecessor again, node for node, up to names.
//
// A layer k "repeats" when its nodes are layer k-1's with the same operators
// and attributes, wired alike: an input made inside the layer comes from the
// same position of it; an input made by an earlier layer j comes from the
// same position of layer j+1 (the residual stream from the layer below; by
// node name, "/layers.j/" read "/layers.j+1/", when layer j+1 does not repeat
// layer j: layer 1 against layer 0); an
// input made by a Constant node is one with the same value; any other input
// is the very same tensor (the positions), or a graph input or initializer
// standing in for one of layer k-1's (its weights), one for one. Whether
// those stand-ins are bound alike is for the checker to decide: this is
// structure only.
//
// Constant nodes are not part of a layer's body: the exporter shares equal
// constants between layers and places (and names) each where it is first
// needed, so they fall anywhere.
#pragma once

#include "shardproof/ir/Graph.h"

#include <string>
#include <vector>

namespace shardproof::ir {

struct LayerStack {
  /// Layer k spans nodes [begin[k], begin[k+1]); begin.back() is the end of
  /// the last layer. Empty: no stack found.
  std::vector<size_t> begin;
  /// body[k]: the nodes of that span but its Constant nodes, in order.
  std::vector<std::vector<size_t>> body;
  /// Per node of the graph: its position in its layer's body, or -1.
  std::vector<int> position;
  /// Per node of the graph: the layer whose span holds it, or -1.
  std::vector<int> layer;
  /// constants[k]: the Constant nodes in layer k's span, in order;
  /// constantsRepeat[k]: they are layer k-1's, value for value.
  std::vector<std::vector<size_t>> constants;
  std::vector<bool> constantsRepeat;
  /// For a repeating layer k: each tensor its body reads from outside itself,
  /// once, with the one layer k-1's body read in its place (b, a).
  std::vector<std::vector<std::pair<int, int>>> outsideInputs;
  /// repeats[k]: layer k is layer k-1 again (never for k < 2: layer 0 reads
  /// the stem, not a layer, so layer 1 cannot be a shift of it).
  std::vector<bool> repeats;
  /// The module path before the layer number ("layers", "model.h").
  std::string container;

  int layers() const { return begin.empty() ? 0 : static_cast<int>(begin.size()) - 1; }
  size_t size(int k) const { return body[k].size(); }
};

/// Finds the stack of `g` (one pass over names, one over wiring).
LayerStack findLayerStack(const Graph &g);

/// The layer number of a node's module path and the container before it
/// ("/layers.12/mlp/Mul" -> 12, "layers"); -1 without one.
int layerNumber(const Node &n, std::string *container = nullptr);
/// A Constant node of the default domain (no inputs, a value attribute).
bool isConstantNode(const Node &n);

} // namespace shardproof::ir
