// Builders the op-table tests share: sizes, shapes, integer vectors, node
// attributes and constant float data, so each test file keeps only its own
// harness and the numbers it checks.
#pragma once

#include "shardproof/ir/Ops.h"
#include "shardproof/support/Error.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::ir::testutil {

inline smt::Expr sym(const char *n) { return smt::Expr::intVar(n); }
inline smt::Expr num(int64_t v) { return smt::Expr::intConst(v); }
inline Shape shape(std::vector<smt::Expr> dims) {
  Shape s;
  for (auto &d : dims)
    s.dims.push_back(d);
  return s;
}
inline IntTensor ints(std::vector<int64_t> v) {
  IntTensor t;
  t.dims = {static_cast<int64_t>(v.size())};
  for (auto x : v)
    t.vals.push_back(num(x));
  return t;
}
inline Attribute strAttr(const std::string &v) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.s = v;
  return a;
}
inline Attribute intAttr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  return a;
}
inline Attribute intsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
inline Attribute floatAttr(double v) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.f = v;
  return a;
}
/// The node a test applies: type `op`, named "/m/<op>", with `outputs` outputs.
inline Node opNode(const std::string &op, std::map<std::string, Attribute> attrs, size_t outputs) {
  Node n;
  n.name = "/m/" + op;
  n.opType = op;
  n.attrs = std::move(attrs);
  n.outputs.assign(outputs, 0);
  return n;
}
/// infer() of `in.node`'s op as a test sees it: the result, or nullopt with
/// the error taken apart into `error` (an op missing from the table fails the
/// test).
inline std::optional<OpResult> inferOp(const OpInputs &in, TakenError &error) {
  const OpDef *def = lookupOp("", in.node.opType);
  EXPECT_NE(def, nullptr) << in.node.opType;
  if (!def)
    return std::nullopt;
  auto r = inferNode(*def, in);
  if (!r) {
    error = takeError(r.takeError());
    return std::nullopt;
  }
  return std::move(*r);
}
/// A constant 1-D float tensor (a Resize scales input, a bias).
inline std::shared_ptr<const TensorData> floats(std::vector<double> v) {
  auto t = std::make_shared<TensorData>();
  t->dtype = DType::Float;
  t->dims = {static_cast<int64_t>(v.size())};
  t->floats = std::move(v);
  return t;
}

} // namespace shardproof::ir::testutil
