#include "shardproof/ir/Graph.h"

namespace shardproof::ir {

const char *toString(DType t) {
  switch (t) {
  case DType::Float: return "float32";
  case DType::Double: return "float64";
  case DType::Float16: return "float16";
  case DType::BFloat16: return "bfloat16";
  case DType::Int64: return "int64";
  case DType::Int32: return "int32";
  case DType::Int16: return "int16";
  case DType::Int8: return "int8";
  case DType::UInt8: return "uint8";
  case DType::Bool: return "bool";
  case DType::Other: return "other";
  }
  return "other";
}

bool isFloating(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 || t == DType::BFloat16;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

int64_t TensorData::numElements() const {
  int64_t n = 1;
  for (auto d : dims)
    n *= d;
  return n;
}

// torch.onnx.export names nodes after the module path: "/layers.0/mlp/fc2/MatMul".
// The last component is the op; the rest, joined by '.', is the module.
// Calls `part` on each module component in order until it returns false;
// returns false if it did.
template <class F> static bool forEachModulePart(std::string_view name, F &&part) {
  if (name.empty() || name[0] != '/')
    return true;
  for (size_t start = 1, slash; (slash = name.find('/', start)) != std::string_view::npos; start = slash + 1)
    if (!part(name.substr(start, slash - start)))
      return false;
  return true;
}

std::string Node::modulePath() const {
  std::string path;
  forEachModulePart(name, [&](std::string_view part) {
    if (!path.empty())
      path += ".";
    path += part;
    return true;
  });
  return path;
}

bool Node::inModule(std::string_view path) const {
  size_t at = 0; // how much of `path` the components so far spell
  bool prefix = forEachModulePart(name, [&](std::string_view part) {
    if (at > 0 && (at >= path.size() || path[at++] != '.'))
      return false;
    if (path.substr(at, part.size()) != part)
      return false;
    at += part.size();
    return true;
  });
  return prefix && at == path.size();
}

std::vector<std::string> Graph::valueNames() const {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (auto &v : values)
    out.push_back(v.name);
  return out;
}

} // namespace shardproof::ir
