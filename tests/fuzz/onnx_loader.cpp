// Fuzz target: bytes -> ONNX loader. Any bytes must give a graph or a user
// error naming the problem; never a crash, an internal error or a graph that
// breaks the loader's own promises (every node input defined, nodes ordered).
#include "FuzzUtil.h"

#include "shardproof/onnx/Loader.h"

using namespace shardproof;

namespace {

void checkGraph(const ir::Graph &g) {
  auto nValues = static_cast<int>(g.values.size());
  // Names are how the spec and the report refer to values: one value per name.
  for (int id = 0; id < nValues; ++id)
    if (g.find(g.values[id].name) != id)
      fuzz::finding("two values are named '" + g.values[id].name + "'");
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int in : g.nodes[n].inputs) {
      if (in < -1 || in >= nValues)
        fuzz::finding("node input id out of range");
      // Topological order: a node's inputs come from earlier nodes.
      if (in >= 0 && g.values[in].producer >= static_cast<int>(n))
        fuzz::finding("node " + std::to_string(n) + " reads a value produced later");
    }
    for (int out : g.nodes[n].outputs)
      if (out < 0 || out >= nValues || g.values[out].producer != static_cast<int>(n))
        fuzz::finding("node output not linked back to its producer");
  }
  for (int id : g.outputs)
    if (id < 0 || id >= nValues)
      fuzz::finding("graph output id out of range");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  for (bool fresh : {true, false}) {
    onnxio::LoadOptions opts;
    opts.freshSymbolsForUnknownDims = fresh;
    auto g = onnxio::loadModelFromBytes(bytes, "fuzz.onnx", opts);
    if (!g) {
      fuzz::rejectInternal(g.takeError(), "loadModelFromBytes");
      continue;
    }
    checkGraph(*g);
  }
  return 0;
}
