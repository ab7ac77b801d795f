// The IR every loader produces: a topologically ordered dataflow graph of ONNX
// operators over tensors with symbolic shapes. Dims are smt::Expr integers over
// named symbols (ONNX dim_param names), so `seq`, `seq // 2` and `8` are all dims.
#pragma once

#include "shardproof/support/Error.h"
#include "shardproof/smt/Expr.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof::ir {

enum class DType { Float, Double, Float16, BFloat16, Int64, Int32, Int16, Int8, UInt8, Bool, Other };
const char *toString(DType t);
bool isFloating(DType t);

using Dim = smt::Expr;

/// A shape's dims. SmallVector's move is not declared noexcept, so a
/// std::vector of anything holding one (classes, values, op results) copied
/// every element, Z3 references and all, each time it grew; moving dims
/// cannot throw (an Expr's move does not), and says so here.
struct DimVec : llvm::SmallVector<Dim, 4> {
  using llvm::SmallVector<Dim, 4>::SmallVector;
  DimVec() = default;
  DimVec(const DimVec &) = default;
  DimVec(DimVec &&) noexcept = default;
  DimVec &operator=(const DimVec &) = default;
  DimVec &operator=(DimVec &&) noexcept = default;
};

struct Shape {
  DimVec dims;
  size_t rank() const { return dims.size(); }
  std::string str() const; // "[batch, seq, 8]"
  /// The same dims, as hash-consed expressions (no solver call).
  bool same(const Shape &o) const {
    if (rank() != o.rank())
      return false;
    for (size_t d = 0; d < rank(); ++d)
      if (!dims[d].same(o.dims[d]))
        return false;
    return true;
  }
};

/// The contents of an initializer or Constant: kept as doubles and int64s (for
/// shape arithmetic), in row-major order.
struct TensorData {
  DType dtype = DType::Float;
  std::vector<int64_t> dims;
  std::vector<double> floats; // floating types
  std::vector<int64_t> ints;  // integer and bool types
  int64_t numElements() const;
  bool isInteger() const { return !ints.empty() || floats.empty(); }
  double at(int64_t flat) const { return isInteger() ? double(ints[flat]) : floats[flat]; }
};

struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats, Strings, Tensor, Other };
  Kind kind = Kind::Other;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const TensorData> tensor;
};

/// A tensor value of the graph.
struct Value {
  std::string name;
  DType dtype = DType::Other;
  /// Shape declared in the file (graph inputs/outputs, value_info), if any.
  std::optional<Shape> declared;
  int producer = -1;     // index into Graph::nodes; -1 for graph inputs and initializers
  int producerSlot = 0;  // which output of the producer
  /// Data of an initializer (nullptr otherwise). Constant nodes keep theirs as an attribute.
  std::shared_ptr<const TensorData> init;
};

struct OpDef;

struct Node {
  std::string name;   // ONNX node name, e.g. "/fc2/MatMul"
  std::string opType; // e.g. "MatMul"
  std::string domain; // "" for the default ONNX domain, "com.microsoft", "shardproof", ...
  /// The op table's row for (domain, opType), looked up once by the loader;
  /// nullptr for an op the table lacks or a node built without the loader.
  const OpDef *op = nullptr;
  std::vector<int> inputs;  // value ids; -1 for an omitted optional input
  std::vector<int> outputs; // value ids
  std::map<std::string, Attribute> attrs;
  /// The Python line that emitted the node, from its doc_string (line 0: none).
  SrcLoc source;
  std::string sourceFunction;

  const Attribute *attr(const std::string &n) const {
    auto it = attrs.find(n);
    return it == attrs.end() ? nullptr : &it->second;
  }
  /// The module path taken from the node name: "/layers.0/mlp/fc2/MatMul" -> "layers.0.mlp.fc2".
  std::string modulePath() const;
  /// modulePath() == path, without building the string (a search over every
  /// rank node asks it of each).
  bool inModule(std::string_view path) const;
};

struct Graph {
  std::string path; // file it was loaded from
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;        // topologically ordered
  std::vector<int> inputs;        // graph inputs that are not initializers
  std::vector<int> initializers;  // values with init data
  std::vector<int> outputs;
  std::map<std::string, int64_t> opsets; // domain -> version
  /// Sizes the graph holds from, by dim_param (model metadata
  /// "shardproof.size_min", written by the torch 2 capture: torch.export
  /// specializes sizes 0 and 1, so its graphs say nothing below 2).
  std::map<std::string, int64_t> sizeMins;
  /// The size condition the graph holds under (metadata "shardproof.assume",
  /// in the spec's constraint syntax: the guards torch could not prove for
  /// every size), or empty for every size.
  std::string assumption;
  llvm::StringMap<int> byName;

  std::optional<int> find(const std::string &n) const {
    auto it = byName.find(n);
    if (it == byName.end())
      return std::nullopt;
    return it->second;
  }
  std::vector<std::string> valueNames() const;
  /// A graph input or initializer: no node computes it.
  bool isSource(int id) const { return values[id].producer < 0; }
};

} // namespace shardproof::ir
