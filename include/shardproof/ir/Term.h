// Element terms: the value of ONE tensor element as a symbolic expression.
//
// Every operator is defined by its index map: output element [i...] is a Term
// built from reads of input elements at index expressions (smt::Expr over
// symbolic dims, index variables and bound variables). Reductions are Sums over
// an index range; concat/pad/where-style piecewise definitions are Selects on an
// index condition. Scalar arithmetic is kept as Apply nodes: Add and Mul are
// n-ary (associative-commutative, real-arithmetic reasoning); everything else
// (Erf, Tanh, Div, ...) is an uninterpreted function of its arguments.
//
// Binder discipline: a Sum at nesting depth L binds the variable named "k!L"
// (depth counted from the root of the stored term). Stored terms are closed at
// depth 0; `instantiate` relevels binders before substituting, so substitution
// never captures. Free index variables are "i!d" (a relation's own indices)
// or "u!d" (a pattern's indices).
#pragma once

#include "shardproof/smt/Expr.h"

#include <llvm/ADT/SmallVector.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardproof::ir {

/// Identifies a tensor class of the merged rank world (a leaf input or a
/// computed tensor). The ir layer treats it as opaque.
using ClassId = uint32_t;

enum class TermKind : uint8_t { Const, Read, Apply, Sum, Select };

enum class Fn : uint8_t {
  Add,   // n-ary, commutative
  Mul,   // n-ary, commutative
  Recip, // 1/x
  Erf, Tanh, Exp, Log, Sqrt, Sigmoid, Relu, Abs, Cos, Sin,
  Pow,             // binary
  Max2, Min2,      // n-ary (associative, commutative, idempotent); also the max/min binder of a Sum node
  Opaque,          // named by TermNode::name (e.g. "Cast:float32")
};
const char *fnName(Fn f);

struct TermNode;
using Term = std::shared_ptr<const TermNode>;
using IndexVec = llvm::SmallVector<smt::Expr, 4>;

struct TermNode {
  TermKind kind;
  double value = 0;       // Const
  ClassId cls = 0;        // Read
  IndexVec idx;           // Read: one index expression per dim
  Fn fn = Fn::Opaque;     // Apply
  std::string name;       // Apply with Fn::Opaque
  std::vector<Term> args; // Apply: operands; Sum: {body}; Select: {then, else}
  smt::Expr lo, hi;       // Sum: the bound variable ranges over [lo, hi)
  int level = 0;          // Sum: its binder is "k!<level>"
  Fn red = Fn::Add;       // Sum: the reduction (Add: sum, Mul: product, Max2: max, Min2: min)
  smt::Expr cond;         // Select: boolean over index variables and symbols
  size_t hash = 0;        // structural
  size_t skeleton = 0;    // structural, ignoring index expressions and bounds
};

// --- Construction (each folds the obvious: Add of one arg, Mul by 0/1, ...) ---
Term mkConst(double v);
Term mkRead(ClassId c, IndexVec idx);
/// `read` (a Read) of class c instead, at the same (already simplified) indices.
Term withClass(const Term &read, ClassId c);
Term mkApply(Fn f, std::vector<Term> args, std::string name = "");
Term mkAdd(std::vector<Term> args);
Term mkMul(std::vector<Term> args);
Term mkSub(const Term &a, const Term &b);
Term mkNeg(const Term &a);
Term mkDiv(const Term &a, const Term &b);
/// Sum over k!level in [lo, hi) of body (body built at depth level+1).
Term mkSum(int level, smt::Expr lo, smt::Expr hi, Term body);
/// The reduction `op` (Fn::Add, Fn::Mul, Fn::Max2 or Fn::Min2) over k!level in
/// [lo, hi) of body: a sum, a product, or the max/min binder (an empty range
/// gives the op's identity: 0, 1, -inf, +inf, as ONNX's reductions on an empty
/// axis; a range of one element gives the body at k!level = lo).
Term mkReduce(Fn op, int level, smt::Expr lo, smt::Expr hi, Term body);
/// The same reduction as the Sum node `like` (its op and level) over another range/body.
Term mkReduceLike(const Term &like, smt::Expr lo, smt::Expr hi, Term body);
/// Identity element of a reduction op (0 for Add, 1 for Mul, -inf for Max2, +inf for Min2).
double reduceIdentity(Fn op);
Term mkSelect(smt::Expr cond, Term thenT, Term elseT);
/// A Select on a condition computed from integer data (a mask), with the
/// integer if-then-elses inside it, and then the comparisons of a boolean
/// combination of index conditions, lifted into nested Selects (at most six
/// deep): `seg(q) == seg(k)` with seg(t) = #{c in offsets: c <= t} becomes
/// selects on `q >= c` and `k >= c`, plain comparisons a sum over k splits on.
Term mkMaskSelect(const smt::Expr &cond, Term thenT, Term elseT);

smt::Expr indexVar(const char *prefix, unsigned d); // "i!d", "u!d"
smt::Expr boundVar(int level);                     // "k!level"
IndexVec indexVars(const char *prefix, unsigned rank);

/// Structural equality (index expressions compared as hash-consed ASTs).
bool sameTerm(const Term &a, const Term &b);
/// The same, except that classes read at the same place need only satisfy
/// `reads(a's class, b's class)` (a renaming being built, say).
bool sameTermUpToReads(const Term &a, const Term &b, const std::function<bool(ClassId, ClassId)> &reads);

/// Renames every binder at depth >= `from` by `delta` levels.
Term relevel(const Term &t, int from, int delta);
/// Substitutes free index variables `vars` by `exprs` in a term stored closed at
/// depth 0, placing it at depth `level` (binders shifted first: no capture).
Term instantiate(const Term &t, const IndexVec &vars, const IndexVec &exprs, int level);
/// Substitutes variables (no releveling; the caller guarantees no capture).
Term substitute(const Term &t, const std::vector<smt::Expr> &from, const std::vector<smt::Expr> &to);
/// Applies `f` to every index expression and bound (e.g. simplify).
Term mapExprs(const Term &t, const std::function<smt::Expr(const smt::Expr &)> &f);

/// `t` with constant factors distributed over sums, c * (a + b) = c*a + c*b,
/// through the additive structure at the top of `t` (real arithmetic):
/// `-(x - y)` and `y - x` become one term. Nodes below other functions are kept.
Term distributeConstants(const Term &t);

/// `t` with every read of class c turned into a read of `rename(c)`, rebuilt
/// with the constructors above (so AC operands are sorted for the new ids).
/// Shared subterms stay shared.
Term renameClasses(const Term &t, const std::function<ClassId(ClassId)> &rename);

/// Every class read anywhere in the term.
void collectReads(const Term &t, std::vector<ClassId> &out);
/// Number of nodes (for limits).
size_t termSize(const Term &t);
/// Whether the variable `name` occurs in any index, condition or bound of `t`.
bool mentionsVar(const Term &t, const std::string &name);
/// Only moves elements (reads, selects, constants): no arithmetic, no sum.
bool isPure(const Term &t);
/// Whether an index, condition or bound of `t` applies an uninterpreted
/// function: reads integer tensor data (named after its class).
bool readsData(const Term &t);
/// Concatenation of `n` pieces along `axis`: element `iv` is piece j's element
/// at iv[axis] minus the lengths of the pieces before j, written as a chain of
/// selects on iv[axis]. `piece(j, src)` is piece j's term at indices `src`.
/// Returns the term and the total length.
std::pair<Term, smt::Expr> concatAlong(size_t n, size_t axis, const IndexVec &iv,
                                       const std::function<smt::Expr(size_t)> &length,
                                       const std::function<Term(size_t, const IndexVec &)> &piece);

/// Human rendering, with `className` naming classes ("h@0").
std::string str(const Term &t, const std::function<std::string(ClassId)> &className);

} // namespace shardproof::ir
