// An ONNX model built in memory, for tests that need a graph too small or too
// broken to export from PyTorch (the loader's tests, the hostile-input tests).
#pragma once

#include <onnx/onnx_pb.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

namespace shardproof::testing {

struct OnnxBuilder {
  onnx::ModelProto m;
  OnnxBuilder() {
    m.set_ir_version(8);
    opset("", 17);
  }
  onnx::GraphProto &g() { return *m.mutable_graph(); }
  OnnxBuilder &opset(const std::string &domain, int64_t version) {
    auto *op = m.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
    return *this;
  }
  // dims: a number is a fixed size, a name a dim_param, "" an unknown size.
  static void shape(onnx::ValueInfoProto *vi, const std::vector<std::string> &dims, int type) {
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto *s = tt->mutable_shape();
    for (auto &d : dims) {
      auto *dim = s->add_dim();
      if (d.empty())
        continue;
      if (std::isdigit(static_cast<unsigned char>(d[0])))
        dim->set_dim_value(std::stoll(d));
      else
        dim->set_dim_param(d);
    }
  }
  OnnxBuilder &input(const std::string &name, const std::vector<std::string> &dims,
                     int type = onnx::TensorProto::FLOAT) {
    auto *vi = g().add_input();
    vi->set_name(name);
    shape(vi, dims, type);
    return *this;
  }
  /// An output by name only (its type left to the loader's inference).
  OnnxBuilder &output(const std::string &name) {
    g().add_output()->set_name(name);
    return *this;
  }
  OnnxBuilder &output(const std::string &name, const std::vector<std::string> &dims,
                      int type = onnx::TensorProto::FLOAT) {
    auto *vi = g().add_output();
    vi->set_name(name);
    shape(vi, dims, type);
    return *this;
  }
  onnx::NodeProto &node(const std::string &name, const std::string &op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string &domain = "") {
    auto *n = g().add_node();
    n->set_name(name);
    n->set_op_type(op);
    n->set_domain(domain);
    for (auto &i : ins)
      n->add_input(i);
    for (auto &o : outs)
      n->add_output(o);
    return *n;
  }
  onnx::TensorProto &initializer(const std::string &name, std::vector<int64_t> dims, int type) {
    auto *t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (auto d : dims)
      t->add_dims(d);
    return *t;
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

} // namespace shardproof::testing
