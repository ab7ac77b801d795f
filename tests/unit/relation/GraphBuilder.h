// Builds small ir::Graphs in code, so the relation engine can be tested
// without ONNX files: `b.input("x", {"batch", 8}); b.node("MatMul", {"x", "w"}, "h", "/fc1/MatMul");`
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/spec/Spec.h"

#include <variant>

namespace shardproof::testing {

using DimSpec = std::variant<int64_t, std::string>;

class GraphBuilder {
public:
  explicit GraphBuilder(std::string path = "test.onnx") { g_.path = std::move(path); }

  GraphBuilder &input(const std::string &name, std::vector<DimSpec> dims) {
    int id = value(name);
    g_.values[id].declared = shape(dims);
    g_.values[id].dtype = ir::DType::Float;
    g_.inputs.push_back(id);
    return *this;
  }
  GraphBuilder &initializer(const std::string &name, std::vector<int64_t> dims, std::vector<int64_t> ints) {
    int id = value(name);
    auto d = std::make_shared<ir::TensorData>();
    d->dtype = ir::DType::Int64;
    d->dims = dims;
    d->ints = ints;
    g_.values[id].init = d;
    g_.values[id].dtype = ir::DType::Int64;
    g_.initializers.push_back(id);
    return *this;
  }
  GraphBuilder &scalar(const std::string &name, double v) {
    int id = value(name);
    auto d = std::make_shared<ir::TensorData>();
    d->dtype = ir::DType::Float;
    d->floats = {v};
    g_.values[id].init = d;
    g_.values[id].dtype = ir::DType::Float;
    g_.initializers.push_back(id);
    return *this;
  }
  GraphBuilder &node(const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs,
                     const std::string &name = "", std::map<std::string, ir::Attribute> attrs = {},
                     const std::string &domain = "") {
    ir::Node n;
    n.opType = op;
    n.domain = domain;
    n.name = name.empty() ? "/" + op + "_" + std::to_string(g_.nodes.size()) : name;
    n.attrs = std::move(attrs);
    for (auto &i : ins)
      n.inputs.push_back(i.empty() ? -1 : value(i));
    for (size_t s = 0; s < outs.size(); ++s) {
      int id = value(outs[s]);
      g_.values[id].producer = static_cast<int>(g_.nodes.size());
      g_.values[id].producerSlot = static_cast<int>(s);
      n.outputs.push_back(id);
    }
    g_.nodes.push_back(std::move(n));
    return *this;
  }
  GraphBuilder &output(const std::string &name) {
    g_.outputs.push_back(value(name));
    return *this;
  }
  ir::Graph build() const { return g_; }

  static ir::Attribute intAttr(int64_t v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::Int;
    a.i = v;
    return a;
  }
  static ir::Attribute intsAttr(std::vector<int64_t> v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::Ints;
    a.ints = std::move(v);
    return a;
  }

private:
  static ir::Shape shape(const std::vector<DimSpec> &dims) {
    ir::Shape s;
    for (auto &d : dims)
      s.dims.push_back(std::holds_alternative<int64_t>(d) ? smt::Expr::intConst(std::get<int64_t>(d))
                                                          : smt::Expr::intVar(std::get<std::string>(d)));
    return s;
  }
  int value(const std::string &name) {
    if (auto id = g_.find(name))
      return *id;
    int id = static_cast<int>(g_.values.size());
    ir::Value v;
    v.name = name;
    v.dtype = ir::DType::Float;
    g_.values.push_back(v);
    g_.byName[name] = id;
    return id;
  }
  ir::Graph g_;
};

} // namespace shardproof::testing
