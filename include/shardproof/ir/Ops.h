// The op table: each ONNX operator is defined once, by
//  - `infer`: output shapes (symbolic) plus the obligations the op implies
//    (broadcast compatibility, matching inner dims, element counts), and, for
//    shape arithmetic, the symbolic integer values of small outputs;
//  - `element`: its index map, the Term for output element [idx...] built from
//    reads of input elements;
//  - for a collective, `collective`: each rank's output shape and element in
//    terms of every rank's input, and the obligations across ranks.
// Adding an op means writing those functions and one table row.
#pragma once

#include "shardproof/ir/Graph.h"
#include "shardproof/ir/Term.h"
#include "shardproof/support/Error.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::ir {

/// A condition that must hold at every admissible size for the op to be well
/// defined (otherwise the graph fails at run time, or computes something else).
struct Obligation {
  std::string what; // "inner dims of MatMul agree"
  smt::Expr cond;
};

/// A small integer tensor known symbolically (shape arithmetic: Shape -> Gather
/// -> Concat -> Reshape). Values are smt::Expr so `seq // 2` flows through.
struct IntTensor {
  std::vector<int64_t> dims; // concrete shape of the integer tensor itself
  std::vector<smt::Expr> vals;
  size_t size() const { return vals.size(); }
};

/// What an op knows about its inputs.
struct OpInputs {
  const Node &node;
  std::vector<std::optional<Shape>> shapes;      // nullopt: omitted optional input
  std::vector<DType> dtypes;
  std::vector<std::optional<IntTensor>> values;  // known integer values
  std::vector<std::shared_ptr<const TensorData>> data; // constant data, if any
  int worldSize = 1; // for collectives
  int64_t opset = 17; // version of the default ONNX domain in the node's model
  /// An integer tensor's element term as an integer expression (data-dependent
  /// indices and masks); unset or nullopt when not known.
  std::function<std::optional<smt::Expr>(const Term &)> indexValue;
  /// Integer value of element `idx` of input `i` (for obligations in infer).
  std::function<std::optional<smt::Expr>(unsigned i, const IndexVec &idx)> inputValue;
  /// Whether an integer expression is >= 0 at every admissible size (a size
  /// such as `padded - 0`); unset: nothing is known.
  std::function<bool(const smt::Expr &)> nonNegative;
  bool has(unsigned i) const { return i < shapes.size() && shapes[i].has_value(); }
  /// Records an omitted optional input (ONNX's empty name) in every list.
  void addOmitted() {
    shapes.push_back(std::nullopt);
    dtypes.push_back(DType::Other);
    values.push_back(std::nullopt);
    data.push_back(nullptr);
  }
};

/// What an op's `infer` works out once for its element map (normalised axes,
/// slice starts): each op family declares its own struct deriving from this.
struct OpState {
  using ExprFn = std::function<void(const smt::Expr &)>;
  virtual ~OpState();
  /// Every symbolic expression the state holds: a memoised result is reused
  /// only if none of them reads a class (NodeMemo walks them).
  virtual void forEachExpr(const ExprFn &fn) const {}

protected:
  static void each(const std::vector<smt::Expr> &v, const ExprFn &fn) {
    for (const smt::Expr &e : v)
      fn(e);
  }
};

struct OpResult {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<Obligation> obligations;
  std::vector<std::optional<IntTensor>> values; // per output, if computable
  /// The op's own state for its element map; null if it needs none.
  std::shared_ptr<const OpState> state;

  /// A fresh state of the op's type, held by this result, to fill in.
  template <class S> S &makeState() {
    auto s = std::make_shared<S>();
    S &ref = *s;
    state = std::move(s);
    return ref;
  }
  /// The state as the op's type; another type (or none) is an internal error.
  template <class S> const S &stateAs() const {
    const auto *s = dynamic_cast<const S *>(state.get());
    SP_CHECK(s, "op state of an unexpected type");
    return *s;
  }
  /// The state as type S, or null (an op that may have none).
  template <class S> const S *stateIf() const { return dynamic_cast<const S *>(state.get()); }
};

/// Reads element `idx` of input `input`, with the caller at binder depth `level`.
using ReadFn = std::function<Term(unsigned input, const IndexVec &idx, int level)>;

enum class OpClass {
  Compute,    // arithmetic on elements
  View,       // output elements are input elements at remapped indices
  Collective, // reads other ranks' tensors: its row's `collective` part
  ShapeOnly,  // produces only integer shape data (Shape, Size); no element map needed
};

/// Reads element `idx` of rank `q`'s input to a collective.
using RankReadFn = std::function<Term(int q, const IndexVec &idx)>;

/// An obligation across the ranks of a collective, charged to rank `rank`'s call.
struct RankObligation {
  int rank;
  Obligation obligation;
};

/// A collective's element map. The relation layer walks the ranks in
/// lock-step and hands the k-th call's row every rank's input shape (`ins`,
/// one per rank; the world size is ins.size()) and a reader of every rank's
/// input; `n` is rank 0's call, which every rank's must equal (same op, same
/// attributes). `infer` still gives one rank's shape from its input alone.
struct CollectiveDef {
  /// Reads a reduction from attribute "op" (sum|max|min, default sum).
  bool readsOp;
  /// The integer axis attributes it reads (checked against the input's rank);
  /// with "op" and "group_size", all a call may carry.
  std::vector<const char *> axes;
  /// Its output is a reduction over the ranks: a class even when its term only
  /// selects (an all-reduce of masked lookups), so the reference's lookup can
  /// be matched to it.
  bool reduces;
  /// Conditions on the ranks' input shapes (equal shapes, divisibility), in order.
  void (*obligations)(const Node &n, const std::vector<Shape> &ins, std::vector<RankObligation> &out);
  /// Rank r's output shape.
  Shape (*shape)(const Node &n, const std::vector<Shape> &ins, int r);
  /// Element `idx` of rank r's output.
  Term (*element)(const Node &n, const std::vector<Shape> &ins, int r, const IndexVec &idx, const RankReadFn &read);
};

/// How many inputs an op takes: the first `min` are required (never omitted),
/// up to `max` in all (kAnyCount: variadic). The infer and element functions
/// may index inputs [0, min) without checking; inferNode makes sure of it.
struct Arity {
  static constexpr uint16_t kAnyCount = UINT16_MAX;
  uint16_t min = 1, max = 1;
};

struct OpDef {
  const char *domain; // "" for ONNX, "com.microsoft", "shardproof"
  const char *type;
  OpClass cls;
  Arity inputs;
  /// Called through inferNode, which checks the arity first.
  llvm::Expected<OpResult> (*infer)(const OpInputs &in);
  /// Element of output `slot` at `idx` (binder depth `level`); null for collectives.
  Term (*element)(const OpInputs &in, const OpResult &r, unsigned slot, const IndexVec &idx,
                  const ReadFn &read, int level);
  /// Collectives only: the element map across ranks.
  const CollectiveDef *collective = nullptr;
};

/// Finds the definition of an op; "ai.onnx" and "" are the same domain.
const OpDef *lookupOp(const std::string &domain, const std::string &type);
/// A node's row: the one the loader looked up, or looked up now for a node
/// built without the loader (tests, the fuzzers); nullptr for an unknown op.
inline const OpDef *opOf(const Node &n) { return n.op ? n.op : lookupOp(n.domain, n.opType); }
/// All supported ops (for docs and --list-ops).
std::vector<const OpDef *> allOps();
/// `def.infer(in)` once the node's inputs fit `def.inputs`: a count out of
/// range, or a required input left empty, is an input error naming the node
/// (a malformed graph must not reach code that reads input 1 of a one-input Sub).
llvm::Expected<OpResult> inferNode(const OpDef &def, const OpInputs &in);
/// Why `count` inputs, the first empty one at `firstEmpty` (>= count: none),
/// do not fit `def.inputs`; nullopt if they do. The loader asks it of every
/// node of a file, so a malformed node is named with its file.
std::optional<std::string> arityProblem(const OpDef &def, const Node &n, size_t count, size_t firstEmpty);
/// The call a collective node makes, as every rank's k-th call must equal it
/// ("AllReduce:sum", "AllGather axis=1"); ranks making different calls would deadlock.
std::string collectiveCall(const Node &n);

// --- helpers shared by op implementations ----------------------------------
/// Normalises a possibly negative axis; error naming the node if out of range.
llvm::Expected<int64_t> normAxis(const Node &n, int64_t axis, size_t rank);
/// Multidirectional (numpy) broadcast of shapes; records an obligation for
/// every pair of symbolic dims that must agree.
llvm::Expected<Shape> broadcastShapes(const Node &n, const std::vector<Shape> &shapes,
                                      std::vector<Obligation> &obl);
/// Unidirectional broadcast of `from` to `to` (Gemm's C, PRelu's slope): each
/// of `from`'s dims, aligned right, is 1 or `to`'s; an input error naming the
/// node and `what` when it cannot be, an obligation when symbolic dims must agree.
llvm::Error broadcastsTo(const Node &n, const char *what, const Shape &from, const Shape &to,
                         std::vector<Obligation> &obl);
/// Index into an input of shape `in` broadcast to an output index `idx`.
IndexVec broadcastIndex(const Shape &in, const IndexVec &idx);
/// Attribute helpers with defaults.
int64_t attrInt(const Node &n, const char *name, int64_t dflt);
std::vector<int64_t> attrInts(const Node &n, const char *name);
std::string describe(const Node &n); // "'/fc2/MatMul' (MatMul)"
/// Symbolic integer contents of input `i` (constants and shape arithmetic);
/// Unsupported error naming `what` if not known.
llvm::Expected<std::vector<smt::Expr>> intInput(const OpInputs &in, unsigned i, const char *what);
/// Ints from input `i` (opset >= 13 style) or else from attribute `attr`.
llvm::Expected<std::vector<smt::Expr>> intsFrom(const OpInputs &in, unsigned i, const char *attr);
/// `e` as a constant, or an Unsupported error naming `what`.
llvm::Expected<int64_t> constInt(const Node &n, const smt::Expr &e, const char *what);
/// Product of dims [from, to).
smt::Expr product(const Shape &s, size_t from, size_t to);
/// A small integer tensor's values gathered into `outDims`: element k takes
/// source element srcIndex(multi-index of k), row-major; nullopt when a source
/// index falls outside (LayoutOps.cpp).
std::optional<IntTensor> remapValues(const IntTensor &v, const std::vector<int64_t> &outDims,
                                     const std::function<std::vector<int64_t>(const std::vector<int64_t> &)> &srcIndex);
/// A result with one output.
OpResult one(Shape s, DType t);
/// One output, the numpy broadcast of every input's shape, of type `t`.
llvm::Expected<OpResult> broadcastResult(const OpInputs &in, DType t);
/// The Reduce* ops' state (ReduceOps.cpp): the sorted reduced axes and
/// keepdims; foldIntValues reads it too.
struct ReduceState : OpState {
  std::vector<int64_t> axes;
  bool keep = true;
};
/// Integer values of output `slot` from the integer values of the inputs, for
/// the elementwise, selection and layout ops of shape arithmetic (ShapeValues.cpp);
/// nullopt if the op or its size is out of scope.
std::optional<IntTensor> foldIntValues(const OpInputs &in, const OpResult &r, unsigned slot);

/// One row of the op table (domain "" is ONNX's default domain).
inline OpDef opRow(const char *type, OpClass c, Arity inputs, decltype(OpDef::infer) infer,
                   decltype(OpDef::element) element, const char *domain = "") {
  return OpDef{domain, type, c, inputs, infer, element, nullptr};
}

// The op families register themselves through these lists (one per file).
std::vector<OpDef> elementwiseOps();
std::vector<OpDef> linalgOps();
std::vector<OpDef> layoutOps();
std::vector<OpDef> sliceOps();
std::vector<OpDef> collectiveOps();
std::vector<OpDef> reduceOps();
std::vector<OpDef> indexOps();
std::vector<OpDef> activationOps();
std::vector<OpDef> scanOps();
std::vector<OpDef> windowOps(); // Conv, pools, Resize

} // namespace shardproof::ir
