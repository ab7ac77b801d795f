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

std::string Node::modulePath() const {
  // torch.onnx.export names nodes after the module path: "/layers.0/mlp/fc2/MatMul".
  // The last component is the op; the rest, joined by '.', is the module.
  if (name.empty() || name[0] != '/')
    return "";
  std::string path;
  size_t start = 1;
  while (true) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos)
      break;
    if (!path.empty())
      path += ".";
    path += name.substr(start, slash - start);
    start = slash + 1;
  }
  return path;
}

bool Node::inModule(std::string_view path) const {
  if (name.empty() || name[0] != '/')
    return path.empty();
  std::string_view rest(name);
  size_t start = 1, at = 0; // at: how much of `path` the components so far spell
  for (size_t slash; (slash = rest.find('/', start)) != std::string_view::npos; start = slash + 1) {
    if (at > 0 && (at >= path.size() || path[at++] != '.'))
      return false;
    std::string_view part = rest.substr(start, slash - start);
    if (path.substr(at, part.size()) != part)
      return false;
    at += part.size();
  }
  return at == path.size();
}

std::vector<std::string> Graph::valueNames() const {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (auto &v : values)
    out.push_back(v.name);
  return out;
}

} // namespace shardproof::ir
