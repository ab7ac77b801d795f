// The op table and helpers shared by every op family.
#include "shardproof/ir/Ops.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include <map>
#include <string_view>
#include <mutex>

namespace shardproof::ir {

OpState::~OpState() = default;


static const std::map<std::pair<std::string, std::string>, OpDef> &table() {
  static const auto t = [] {
    std::map<std::pair<std::string, std::string>, OpDef> m;
    for (auto fam : {elementwiseOps, linalgOps, layoutOps, sliceOps, collectiveOps, reduceOps, indexOps,
                     activationOps, scanOps, windowOps})
      for (const OpDef &d : fam())
        m.emplace(std::make_pair(std::string(d.domain), std::string(d.type)), d);
    return m;
  }();
  return t;
}

// The table by operator name (asked for every node of every graph, several
// times: the map's key pairs of strings cost a copy and a string comparison
// per level); then the domain among the few definitions of that name.
static const llvm::StringMap<llvm::SmallVector<const OpDef *, 2>> &byType() {
  static const auto t = [] {
    llvm::StringMap<llvm::SmallVector<const OpDef *, 2>> m;
    for (auto &[key, d] : table())
      m[key.second].push_back(&d);
    return m;
  }();
  return t;
}

const OpDef *lookupOp(const std::string &domain, const std::string &type) {
  auto it = byType().find(type);
  if (it == byType().end())
    return nullptr;
  std::string_view canon = domain == "ai.onnx" ? std::string_view() : std::string_view(domain);
  for (const OpDef *d : it->second)
    if (canon == d->domain)
      return d;
  return nullptr;
}

std::vector<const OpDef *> allOps() {
  std::vector<const OpDef *> out;
  for (auto &[_, d] : table())
    out.push_back(&d);
  return out;
}

static std::string countText(Arity a) {
  if (a.max == Arity::kAnyCount)
    return "at least " + std::to_string(a.min);
  if (a.min == a.max)
    return std::to_string(a.min);
  return std::to_string(a.min) + " to " + std::to_string(a.max);
}

std::optional<std::string> arityProblem(const OpDef &def, const Node &n, size_t count, size_t firstEmpty) {
  if (count < def.inputs.min || count > def.inputs.max)
    return "node " + describe(n) + " has " + std::to_string(count) + (count == 1 ? " input; " : " inputs; ") +
           def.type + " takes " + countText(def.inputs);
  if (firstEmpty < def.inputs.min)
    return "node " + describe(n) + ": input " + std::to_string(firstEmpty) + " of " + def.type +
           " is required but left empty";
  return std::nullopt;
}

llvm::Expected<OpResult> inferNode(const OpDef &def, const OpInputs &in) {
  size_t firstEmpty = 0;
  while (firstEmpty < in.shapes.size() && in.has(static_cast<unsigned>(firstEmpty)))
    ++firstEmpty;
  if (auto why = arityProblem(def, in.node, in.shapes.size(), firstEmpty))
    return userError(*why);
  return def.infer(in);
}

llvm::Expected<std::vector<smt::Expr>> intInput(const OpInputs &in, unsigned i, const char *what) {
  if (i >= in.values.size() || !in.values[i])
    return unsupportedError("node " + describe(in.node) + ": " + what +
                            " is not a constant or computable shape value");
  return in.values[i]->vals;
}

// Ints from an input (opset >= 13 style) or else from an attribute.
llvm::Expected<std::vector<smt::Expr>> intsFrom(const OpInputs &in, unsigned i, const char *attr) {
  if (in.has(i))
    return intInput(in, i, attr);
  std::vector<smt::Expr> out;
  for (int64_t v : attrInts(in.node, attr))
    out.push_back(smt::Expr::intConst(v));
  return out;
}

llvm::Expected<int64_t> constInt(const Node &n, const smt::Expr &e, const char *what) {
  if (auto v = e.asInt())
    return *v;
  return unsupportedError("node " + describe(n) + ": " + what + " must be a constant, got " + e.str());
}

smt::Expr product(const Shape &s, size_t from, size_t to) {
  smt::Expr p = smt::Expr::intConst(1);
  for (size_t d = from; d < to; ++d)
    p = p * s.dims[d];
  return p;
}

llvm::Expected<OpResult> broadcastResult(const OpInputs &in, DType t) {
  OpResult r;
  std::vector<Shape> shapes;
  for (unsigned i = 0; i < in.shapes.size(); ++i) {
    if (!in.has(i))
      return userError("node " + describe(in.node) + ": input " + std::to_string(i) + " is missing");
    shapes.push_back(*in.shapes[i]);
  }
  auto s = broadcastShapes(in.node, shapes, r.obligations);
  if (!s)
    return s.takeError();
  r.shapes = {*s};
  r.dtypes = {t};
  return r;
}

OpResult one(Shape s, DType t) {
  OpResult r;
  r.shapes = {std::move(s)};
  r.dtypes = {t};
  return r;
}

std::string describe(const Node &n) {
  std::string op = n.domain.empty() ? n.opType : n.domain + "::" + n.opType;
  return "'" + (n.name.empty() ? std::string("<unnamed>") : n.name) + "' (" + op + ")";
}

llvm::Expected<int64_t> normAxis(const Node &n, int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return userError("node " + describe(n) + ": axis " + std::to_string(axis) +
                     " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

int64_t attrInt(const Node &n, const char *name, int64_t dflt) {
  const Attribute *a = n.attr(name);
  return a && a->kind == Attribute::Kind::Int ? a->i : dflt;
}

std::vector<int64_t> attrInts(const Node &n, const char *name) {
  const Attribute *a = n.attr(name);
  if (!a)
    return {};
  if (a->kind == Attribute::Kind::Ints)
    return a->ints;
  if (a->kind == Attribute::Kind::Int)
    return {a->i};
  return {};
}

static bool isOne(const Dim &d) {
  auto v = d.asInt();
  return v && *v == 1;
}

llvm::Expected<Shape> broadcastShapes(const Node &n, const std::vector<Shape> &shapes,
                                      std::vector<Obligation> &obl) {
  size_t rank = 0;
  for (auto &s : shapes)
    rank = std::max(rank, s.rank());
  Shape out;
  out.dims.assign(rank, smt::Expr::intConst(1));
  for (auto &s : shapes) {
    size_t off = rank - s.rank();
    for (size_t d = 0; d < s.rank(); ++d) {
      Dim &o = out.dims[off + d];
      const Dim &x = s.dims[d];
      if (isOne(x))
        continue;
      if (isOne(o)) {
        o = x;
        continue;
      }
      auto a = o.asInt(), b = x.asInt();
      if (a && b && *a != *b)
        return userError("node " + describe(n) + ": shapes cannot broadcast (" +
                         std::to_string(*a) + " vs " + std::to_string(*b) + ")");
      if (!o.same(x))
        // ONNX's own inference drops this condition; we keep it (a symbolic dim
        // that is 1 at some size would broadcast instead).
        obl.push_back({"broadcast dims of " + describe(n) + " agree: " + o.str() + " == " + x.str(),
                       o == x});
    }
  }
  return out;
}

llvm::Error broadcastsTo(const Node &n, const char *what, const Shape &from, const Shape &to,
                         std::vector<Obligation> &obl) {
  if (from.rank() > to.rank())
    return userError("node " + describe(n) + ": " + what + " " + from.str() + " has more dims than " + to.str());
  size_t off = to.rank() - from.rank();
  for (size_t d = 0; d < from.rank(); ++d) {
    const Dim &s = from.dims[d], &t = to.dims[off + d];
    auto a = s.asInt(), b = t.asInt();
    if ((a && *a == 1) || s.same(t))
      continue;
    if (a && b) // one way: the target is never expanded to `from`'s shape
      return userError("node " + describe(n) + ": " + what + " " + from.str() + " does not broadcast to " + to.str());
    // As for numpy broadcasts, a symbolic dim must equal the target's (one that
    // is 1 at some size would broadcast instead, and the index map reads idx).
    obl.push_back({std::string(what) + " of " + describe(n) + " broadcasts to " + to.str() + ": " + s.str() +
                       " == " + t.str(),
                   s == t});
  }
  return llvm::Error::success();
}

IndexVec broadcastIndex(const Shape &in, const IndexVec &idx) {
  IndexVec out;
  size_t off = idx.size() - in.rank();
  for (size_t d = 0; d < in.rank(); ++d)
    out.push_back(isOne(in.dims[d]) ? smt::Expr::intConst(0) : idx[off + d]);
  return out;
}

} // namespace shardproof::ir
