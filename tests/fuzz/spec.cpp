// Fuzz target: bytes -> YAML spec. Specs are parsed as if they sat in
// specs/examples, so the shipped seeds resolve to real models; when a spec
// parses and names only models from a small fixed set (the MLP examples, loaded
// once), the check runs too: the spec/verifier boundary must answer every
// spec with a verdict or a user error, never a crash or an internal error.
#include "FuzzUtil.h"

#include "shardproof/onnx/Loader.h"
#include "shardproof/relation/Verifier.h"
#include "shardproof/spec/Spec.h"

#include <filesystem>
#include <map>

using namespace shardproof;

namespace {

const std::string kDir = std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples";

// Small models only, so an execution stays well under a second.
const std::map<std::string, ir::Graph> &models() {
  static const std::map<std::string, ir::Graph> m = [] {
    std::map<std::string, ir::Graph> out;
    for (const char *f : {"mlp_ref.onnx", "mlp_tp2_rank0.onnx", "mlp_tp2_rank1.onnx",
                          "mlp_bias_before_reduce_rank0.onnx", "mlp_bias_before_reduce_rank1.onnx",
                          "mlp_no_allreduce_rank0.onnx", "mlp_no_allreduce_rank1.onnx"}) {
      std::string path = (std::filesystem::path(kDir) / f).lexically_normal().string();
      if (!std::filesystem::exists(path))
        continue; // models not exported yet: parsing is still fuzzed
      auto g = onnxio::loadModel(path);
      if (!g)
        fuzz::finding("shipped model " + path + " does not load: " + shardproof::toString(g.takeError()));
      out.emplace(path, std::move(*g));
    }
    return out;
  }();
  return m;
}

const ir::Graph *model(const std::string &path) {
  auto it = models().find(path);
  return it == models().end() ? nullptr : &it->second;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  auto s = spec::parseSpec(text, kDir + "/fuzz.yaml");
  if (!s) {
    fuzz::rejectInternal(s.takeError(), "parseSpec");
    return 0;
  }
  if (s->worldSize != static_cast<int>(s->rankPaths.size()))
    fuzz::finding("world_size " + std::to_string(s->worldSize) + " but " +
                  std::to_string(s->rankPaths.size()) + " rank paths");
  const ir::Graph *ref = model(s->reference);
  if (!ref || s->worldSize > 4)
    return 0;
  std::vector<ir::Graph> ranks;
  for (auto &p : s->rankPaths) {
    const ir::Graph *g = model(p);
    if (!g)
      return 0;
    ranks.push_back(*g);
  }
  relation::Options opts;
  opts.solverTimeoutMs = 2000;
  auto r = relation::verify(*ref, ranks, *s, opts);
  if (!r)
    fuzz::rejectInternal(r.takeError(), "verify");
  return 0;
}
