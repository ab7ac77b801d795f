// Internal: the tensor classes of the merged rank world.
#pragma once

#include "shardproof/support/Error.h"

#include "shardproof/ir/Graph.h"
#include "shardproof/ir/Term.h"

#include <llvm/ADT/DenseMap.h>

#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardproof::relation {

using ir::ClassId;
using ir::Term;

/// What a tensor's elements can be, as far as definitions show: reals only,
/// reals or -inf (a masked max), or unknown (+inf or NaN not ruled out).
enum class Finiteness : uint8_t { Finite, FiniteOrNegInf, Unknown };

/// A rank tensor's class label, "name@rank", in one allocation (a copied
/// layer labels tens of thousands of images).
inline std::string rankLabel(std::string_view name, int rank) {
  char digits[12];
  int n = std::snprintf(digits, sizeof digits, "@%d", rank);
  std::string out;
  out.reserve(name.size() + static_cast<size_t>(n));
  out.append(name).append(digits, static_cast<size_t>(n));
  return out;
}

// A new field that states a fact about the tensor (not a name) must also be
// compared by sameFacts in NodeMemo.cpp, or a memoized result could be reused
// for a class that differs in it.
struct ClassInfo {
  enum Kind { Leaf, Constant, Compute } kind = Leaf;
  std::string label;  // "w1@0", "x", "/fc1/MatMul_output_0@1"
  ir::Shape shape;
  Term def;           // Compute: element at pattern indices u!0.., over other classes
  int rank = -1;      // -1: shared by every rank (replicated leaf, collective output)
  // The producing node's name on its first rank ("" for leaves): a view of
  // that rank's graph, which outlives the check (not a copy per class).
  std::string_view node;
  /// The rank values interned as this class (value ids in their rank's
  /// graph): a million in a 126-layer step, so ids, not text.
  struct Member {
    int rank;
    int value;
  };
  std::vector<Member> members;
  /// Adds rank `rank`'s value `value` as a member; a class computed on
  /// several ranks is shared by them (rank -1, label "name@*").
  void join(int rank, int value) {
    if (!members.empty() && this->rank != rank && this->rank >= 0) {
      this->rank = -1;
      if (auto at = label.rfind('@'); at != std::string::npos)
        label = label.substr(0, at) + "@*";
    }
    members.push_back({rank, value});
  }
  std::vector<double> data;          // Constant: values (row-major)
  /// Leaf integer inputs with a spec `values` range [min, max]: their elements
  /// are uninterpreted functions of the index, bounded by it.
  std::optional<std::pair<smt::Expr, smt::Expr>> valueRange;
  /// `value: E` / `fill: E` in the spec: every element is valueRange->first.
  bool exactValue = false;
  /// `elements: [E0, ...]`: element i of this 1-D leaf is elements[i].
  std::vector<smt::Expr> elements;
  std::vector<int64_t> dataDims;
  /// Leaf standing for a reference tensor that no rank computes and whose term
  /// outgrew maxTermNodes: downstream terms read it instead of repeating that
  /// term (which grows exponentially with depth). Its elements are arbitrary,
  /// so whatever is proven over it holds; it is never evaluated numerically.
  bool abstractedReference = false;
  /// Derived by ClassTable::add from the definition and the facts of the
  /// classes it reads, so a question about a deep tensor never walks the
  /// layers below it (and a layer's answer rests on its own classes only).
  Finiteness finite = Finiteness::Unknown;
};

class ClassTable {
public:
  ClassId add(ClassInfo info);
  // A class id from another table (the replay's local one, a stale memo) would
  // read some other tensor's definition: checked, never trusted.
  const ClassInfo &operator[](ClassId c) const {
    SP_CHECK(c < classes_.size(), "class id " + std::to_string(c) + " outside the class table");
    if (recording_)
      log_.push_back(c);
    return classes_[c];
  }
  ClassInfo &operator[](ClassId c) {
    SP_CHECK(c < classes_.size(), "class id " + std::to_string(c) + " outside the class table");
    if (recording_)
      log_.push_back(c);
    return classes_[c];
  }
  size_t size() const { return classes_.size(); }
  /// Room for `n` classes in all (a layer copy knows how many its layers add:
  /// the table's growth moved every class three hundred bytes at a time).
  void reserve(size_t n) { classes_.reserve(n); }
  /// An access that is not recorded: for the memo's own validation.
  const ClassInfo &peek(ClassId c) const { return classes_[c]; }

  /// Records which classes a computation consults (every access above), so
  /// its result can be reused for a renamed copy of its inputs (NodeMemo.h).
  /// Scopes nest; an inner scope's classes count for the outer ones too.
  class Recording {
  public:
    // Each scope has its own flags, so a scope begun after something spoiled
    // its outer one can still be reused; what spoils an inner scope spoils
    // the outer ones too (they contain it).
    explicit Recording(const ClassTable &t)
        : t_(t), start_(t.log_.size()), outerPoisoned_(t.poisoned_), outerDerived_(t.derivedRead_) {
      ++t_.recording_;
      t_.poisoned_ = t_.derivedRead_ = false;
    }
    ~Recording() {
      t_.poisoned_ |= outerPoisoned_;
      t_.derivedRead_ |= outerDerived_;
      if (--t_.recording_ == 0) {
        t_.log_.clear();
        t_.poisoned_ = t_.derivedRead_ = false;
      }
    }
    Recording(const Recording &) = delete;
    Recording &operator=(const Recording &) = delete;
    /// The classes consulted since the scope began, each once, ascending.
    std::vector<ClassId> consulted() const;
    /// False if the computation did something a renaming cannot replay
    /// (created a class, read a cache derived from class definitions).
    bool reusable() const { return !t_.poisoned_; }
    /// Whether it read a cache derived from class definitions (poisonRecording):
    /// then consulted() misses what that cache rests on. Creating classes is
    /// not such a read (a layer copy recreates them, LayerCopy.h).
    bool readDerivedCache() const { return t_.derivedRead_; }

  private:
    const ClassTable &t_;
    size_t start_;
    bool outerPoisoned_, outerDerived_;
  };
  /// Suspends the recording: for work whose accesses a reused result does not
  /// rest on (a numeric probe that can only reject). Recordings begun inside
  /// it are separate; the suspended one resumes as it was, poisoned if a
  /// class was created meanwhile (the computation could know it unrecorded).
  class Unrecorded {
  public:
    explicit Unrecorded(const ClassTable &t)
        : t_(t), recording_(t.recording_), poisoned_(t.poisoned_), derivedRead_(t.derivedRead_),
          log_(std::move(t.log_)), size_(t.classes_.size()) {
      t_.recording_ = 0;
      t_.log_.clear();
    }
    ~Unrecorded() {
      t_.recording_ = recording_;
      t_.poisoned_ = poisoned_ || (recording_ && t_.classes_.size() != size_);
      t_.derivedRead_ = derivedRead_;
      t_.log_ = std::move(log_);
    }
    Unrecorded(const Unrecorded &) = delete;
    Unrecorded &operator=(const Unrecorded &) = delete;

  private:
    const ClassTable &t_;
    unsigned recording_;
    bool poisoned_, derivedRead_;
    std::vector<ClassId> log_;
    size_t size_;
  };
  /// Marks the computations being recorded as not reusable: they read a
  /// cache derived from class definitions outside any recording.
  void poisonRecording() const {
    if (recording_)
      poisoned_ = derivedRead_ = true;
  }
  /// The interned computed class with this definition and shape, if any.
  std::optional<ClassId> find(const Term &def, const ir::Shape &shape) const;

  /// Hash-consing of computed classes: returns an existing class with the same
  /// definition and shape, or creates one.
  ClassId intern(ClassInfo info, bool &created);
  /// A computed class find() does not know yet (the caller just asked it):
  /// added and registered for find, without looking it up again.
  ClassId addNew(ClassInfo info);
  /// addNew for a class whose `finite` the caller set: a layer copy's image,
  /// whose definition is its class's renamed to classes of the same facts.
  ClassId addImage(ClassInfo info);
  /// One region of a class definition: where `cond` holds (over u!0..), the
  /// element is `leaf`. A definition without a top-level Select is one piece.
  struct Piece {
    ClassId cls;
    smt::Expr cond;
    Term leaf;
  };
  /// Pieces of class definitions with this skeleton (candidates for matching).
  const std::vector<Piece> &withSkeleton(size_t skeleton) const;
  /// Finiteness of a term's elements from its own nodes and the classes it
  /// reads (each read is a recorded access of that class).
  Finiteness finiteness(const Term &t) const;
  /// Constant classes are keyed by content so reference and ranks share them.
  ClassId constant(const std::string &label, const std::vector<int64_t> &dims, const std::vector<double> &data);
  std::string label(ClassId c) const { return classes_[c].label; }

private:
  /// Registers every leaf of the Select tree of a definition as a matchable
  /// piece: a masked tensor (causal mask, padding) is matched region by region.
  void addPieces(ClassId id, const Term &t, const smt::Expr &cond);
  ClassId addWithFacts(ClassInfo info);
  /// A region `cond` split by a Select's mask, simplified (keyed by both ids).
  struct Region {
    smt::Expr cond, mask, in, out;
  };
  /// Keys that are hashes already (of terms, of contents, of two ids): one
  /// more mix for the buckets, the two values DenseMap reserves moved aside
  /// by key() (every index's hits are compared in full).
  struct HashKey {
    static uint64_t getEmptyKey() { return ~0ULL; }
    static uint64_t getTombstoneKey() { return ~0ULL - 1; }
    static unsigned getHashValue(uint64_t k) {
      return static_cast<unsigned>(((k ^ (k >> 31)) * 0x9E3779B97F4A7C15ULL) >> 32);
    }
    static bool isEqual(uint64_t a, uint64_t b) { return a == b; }
  };
  static uint64_t key(uint64_t h) { return h >= ~0ULL - 1 ? h - 2 : h; }
  template <class V> using HashIndex = llvm::DenseMap<uint64_t, V, HashKey>;
  HashIndex<Region> regions_;
  std::vector<ClassInfo> classes_;
  HashIndex<std::vector<ClassId>> byHash_;
  /// withSkeleton hands out references: the lists sit in a deque, which
  /// never moves them, and the map holds their places.
  HashIndex<unsigned> skeletonAt_;
  std::deque<std::vector<Piece>> skeletons_;
  std::vector<Piece> &bySkeleton(size_t skeleton);
  HashIndex<std::vector<ClassId>> byContent_;
  std::vector<Piece> none_;
  mutable unsigned recording_ = 0;
  mutable bool poisoned_ = false;
  mutable bool derivedRead_ = false;
  mutable std::vector<ClassId> log_;
};

} // namespace shardproof::relation
