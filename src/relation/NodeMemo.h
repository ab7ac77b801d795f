// Internal: reuse of per-node work across layers identical up to names.
//
// A model stacks the same block L times. Layer k+1's terms are layer k's with
// other classes (other weights, another residual stream), so evaluating a
// node's element map, or covering a reference term by rank classes, repeats
// the same rewriting. NodeMemo keys that work by the canonical form of its
// inputs: every Term, index expression, shape and attribute, with classes
// numbered by first occurrence, so two keys are equal exactly when the inputs
// are equal up to a renaming sigma of classes.
//
// Why reuse is sound: the result was derived from the inputs, the facts about
// symbols (global), and the definitions of the classes the computation
// consulted (ClassTable::Recording logs every access). Every other class read
// by the inputs or the result was opaque to it, so the result holds for any
// tensor in its place. A stored result is reused only if sigma extends to
// every consulted class c with a class sigma(c) of the same kind, shape,
// rank, value bounds, finiteness and definition (up to sigma); then sigma(result) is what
// the same derivation gives for the renamed inputs. Results whose index
// expressions name classes (data-dependent reads: uninterpreted functions
// named after a class), that created classes, or that met a solver Unknown
// are never stored.
#pragma once

#include "Classes.h"

#include "shardproof/ir/Ops.h"

#include <llvm/ADT/DenseMap.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardproof::relation {

/// The canonical form of a computation's inputs up to renaming classes.
class MemoKey {
public:
  /// `facts`: the table whose classes the terms read. Operands of a
  /// commutative op that have the same form are then ordered by their
  /// classes' ranks (a fact the memo checks anyway), so two layers' sums over
  /// the 8 ranks' shards, listed in class-id order, get one key; without it
  /// they keep their listed order.
  explicit MemoKey(const ClassTable *facts = nullptr) : facts_(facts) {}

  /// Terms larger than this are not keyed (walked as trees, DAG sharing lost).
  static constexpr size_t kMaxNodes = 4096;

  void word(uint64_t w);
  void real(double d); // by its bits
  void str(const std::string &s);
  void expr(const smt::Expr &e);
  void shape(const std::optional<ir::Shape> &s);
  /// A term; false (the key is then unusable) if it is too large.
  void term(const ir::Term &t);
  bool usable() const { return usable_; }
  size_t hash() const { return hash_; }
  /// Local number -> class, in order of first occurrence.
  const std::vector<ClassId> &classes() const { return classes_; }
  /// Same canonical form (so the two differ by a renaming of classes).
  bool sameForm(const MemoKey &o) const;
  /// Whether an expression of the key applies an uninterpreted function.
  bool namesClasses() const;

private:
  void walk(const ir::Term &t);
  size_t formHash(const ir::Term &t);
  std::vector<uint64_t> words_;
  std::vector<smt::Expr> exprs_; // held: an AST id is only stable while alive
  std::vector<std::string> strs_;
  std::vector<ClassId> classes_;
  llvm::DenseMap<ClassId, unsigned> local_;
  llvm::DenseMap<const ir::TermNode *, size_t> forms_; // formHash, per node of this key
  const ClassTable *facts_;
  size_t hash_ = 0, nodes_ = 0;
  bool usable_ = true;
};

/// A class renaming found by a memo hit.
class Renaming {
public:
  ClassId operator()(ClassId c) const {
    auto it = map_.find(c);
    return it == map_.end() ? c : it->second;
  }
  ir::Term apply(const ir::Term &t) const;
  /// Maps `from` to `to`; false if `from` already maps elsewhere.
  bool bind(ClassId from, ClassId to);
  bool has(ClassId c) const { return map_.count(c) != 0; }

private:
  llvm::DenseMap<ClassId, ClassId> map_;
};

/// Extends `sigma` to every class of `consulted` (ascending) as a memo hit
/// does, checking each counterpart has the same facts and (for a computed
/// class) the same definition up to sigma. False: no such extension.
bool extendRenaming(const std::vector<ClassId> &consulted, Renaming &sigma, const ClassTable &classes);
/// Every fact of a class but its name, node and members.
bool sameClassFacts(const ClassInfo &a, const ClassInfo &b);

class NodeMemo {
public:
  struct Result {
    std::vector<ir::Term> terms;
    uint64_t extra = 0; // caller's data (e.g. a match count)
    std::string text;   // a rendering, class names as placeholders
    // A node's evaluation: what the op table inferred (shapes, side
    // conditions naming `node`), and whether `terms` are its element maps.
    std::optional<ir::OpResult> op;
    std::string node;
    bool elements = false;
  };
  /// A stored result whose key has the same form and whose consulted classes
  /// have counterparts under the renaming; the renaming maps its classes.
  std::optional<std::pair<const Result *, Renaming>> lookup(const MemoKey &key, const ClassTable &classes);
  /// Stores `result` for `key` (no-op if the key or result cannot be reused).
  void store(MemoKey key, std::vector<ClassId> consulted, Result result);

  unsigned hits() const { return hits_; }
  unsigned stored() const { return stored_; }

private:
  /// Entries per hash: room for two layers' of one node on 16 ranks.
  static constexpr size_t kBucketEntries = 32;
  struct Entry {
    MemoKey key;
    std::vector<ClassId> consulted;
    Result result;
  };
  bool extend(const Entry &e, Renaming &sigma, const ClassTable &classes) const;
  std::unordered_map<size_t, std::vector<Entry>> entries_;
  unsigned hits_ = 0, stored_ = 0;
};

} // namespace shardproof::relation
