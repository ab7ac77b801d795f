// Numeric evaluation of element terms at concrete sizes: the independent check
// that a counterexample is real. Leaf tensors get deterministic pseudo-random
// values keyed by their label and index, so a replicated input reads the same
// on every rank and in the reference.
#include "Replayer.h"
#include "shardproof/ir/OpaqueFns.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/Hashing.h>
#include <llvm/ADT/SmallVector.h>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

namespace {

struct Evaluator {
  Evaluator(const ClassTable &classes, const std::map<std::string, int64_t> &sizes) : classes(classes) {
    for (auto &[n, v] : sizes)
      bind(Expr::slotOf(n), v);
  }
  // `apps` points back at this evaluator: never copied or moved.
  Evaluator(const Evaluator &) = delete;
  Evaluator &operator=(const Evaluator &) = delete;

  const ClassTable &classes;
  // Variable values by slot (Expr::slotOf): sizes, i!d, u!d, k!n. Index
  // expressions are evaluated millions of times; a map by name cost a string
  // comparison per variable read.
  Expr::Slots env;
  Expr::AppEnv apps = [this](const std::string &f, const std::vector<int64_t> &a) { return app(f, a); };
  // Each class's shape at these sizes, once evaluated (its reads are bounds-checked each time).
  std::vector<std::optional<llvm::SmallVector<int64_t, 4>>> dimsOf;
  // Computed elements by class and flat index: a table for a class of at
  // most kDenseElements elements at these sizes, a hash map past that. A
  // map keyed by (class, index vector) allocated a key per read.
  struct ClassMemo {
    std::vector<double> values;
    std::vector<bool> known;
    std::unordered_map<int64_t, double> sparse;
  };
  std::vector<std::unique_ptr<ClassMemo>> memo;
  static constexpr int64_t kDenseElements = int64_t{1} << 16;
  // Leaf hashes of each class's label (and of its cut-leaf label), by class.
  std::vector<std::optional<size_t>> labelHash, cutHash;
  std::map<std::string, ClassId> byFunction; // valueFunction name -> class
  std::optional<int64_t> intOffset;          // see Replayer
  Replayer::LeafSet *recordReads = nullptr;      // see Replayer::recordLeafReads
  const Replayer::LeafSet *keepReads = nullptr; // see Replayer::perturbUnread
  Replayer::ElementReads *elementReads = nullptr; // see Replayer::recordElementReads
  std::vector<Replayer::Element> computing;       // compute elements being evaluated, innermost last
  static constexpr size_t kMaxRecordedReads = 200'000;
  size_t recordedReads = 0;
  std::vector<double> *seenValues = nullptr; // see Replayer::recordValues
  // See Replayer::cutBelow: with `cut`, only classes marked in `exact` are
  // evaluated (a mask, not a set: one lookup per class read of the probe).
  bool cut = false;
  std::vector<char> exact;
  bool isExact(ClassId c) const { return c < exact.size() && exact[c]; }
  void markExact(const std::set<ClassId> &cs) {
    for (ClassId c : cs) {
      if (c >= exact.size())
        exact.resize(c + 1);
      exact[c] = 1;
    }
  }
  std::vector<char> readAsCut;               // classes read as cut leaves (see Replayer::widenCut)

  // Values of Sum subterms by the values of their free variables. A norm's
  // variance sums (x - mean)^2 with the mean a sum itself: without this, every
  // output element re-sums the mean once per reduced element, n^2 reads each.
  // Both tables pin their terms (the sums by sumFree), so a freed node's
  // address is never reused under them.
  struct SumKey {
    const TermNode *sum; // pinned by sumFree
    llvm::SmallVector<int64_t, 4> values;
    bool operator==(const SumKey &o) const { return sum == o.sum && values == o.values; }
  };
  struct SumKeyHash {
    size_t operator()(const SumKey &k) const {
      return llvm::hash_combine(k.sum, llvm::hash_combine_range(k.values.begin(), k.values.end()));
    }
  };
  std::unordered_map<SumKey, double, SumKeyHash> sumMemo;
  std::unordered_map<const TermNode *, std::pair<Term, std::vector<uint32_t>>> sumFree;

  // The variables a Sum's value depends on: every variable of its index
  // expressions, bounds and conditions, less the binders inside it.
  const std::vector<uint32_t> &freeVars(const Term &t) {
    auto [it, fresh] = sumFree.try_emplace(t.get());
    if (!fresh)
      return it->second.second;
    it->second.first = t;
    std::set<std::string> vars;
    std::set<int> bound;
    std::function<void(const Term &)> walk = [&](const Term &u) {
      auto add = [&](const Expr &e) {
        if (e.isValid())
          for (auto &v : e.vars())
            vars.insert(v);
      };
      for (auto &e : u->idx)
        add(e);
      add(u->lo);
      add(u->hi);
      add(u->cond);
      if (u->kind == TermKind::Sum)
        bound.insert(u->level);
      for (auto &a : u->args)
        walk(a);
    };
    walk(t);
    for (auto &v : vars)
      if (!(v.rfind("k!", 0) == 0 && bound.count(std::atoi(v.c_str() + 2))))
        it->second.second.push_back(Expr::slotOf(v));
    return it->second.second;
  }

  // Values of the evaluated term's own subterms (not of class definitions):
  // each result and, for a sum or product of a few terms, every partial one,
  // since normalization flattens (a - m) - l into one sum of three.
  void see(const Term &t, llvm::ArrayRef<double> a, double v) {
    if (!seenValues || depth > 0)
      return;
    seenValues->push_back(v);
    bool add = t->kind == TermKind::Apply && t->fn == Fn::Add, mul = t->kind == TermKind::Apply && t->fn == Fn::Mul;
    if ((!add && !mul) || a.size() < 3 || a.size() > 5)
      return;
    for (unsigned mask = 1; mask + 1 < (1u << a.size()); ++mask) {
      if (__builtin_popcount(mask) < 2)
        continue;
      double x = add ? 0 : 1;
      for (size_t i = 0; i < a.size(); ++i)
        if (mask >> i & 1)
          x = add ? x + a[i] : x * a[i];
      seenValues->push_back(x);
    }
  }

  // Work left before giving up; `incomplete` then says the number means nothing.
  uint64_t budget = 50'000'000;
  bool incomplete = false;
  // Class definitions read through one another: a chain of 20,000 ops is a
  // recursion 20,000 deep, which overflowed the stack. Deeper than this, the
  // number is incomplete instead.
  static constexpr unsigned kMaxDepth = 2000;
  unsigned depth = 0;
  // The depth bound assumes a frame size; the sanitizers' frames are larger
  // (2,000 levels overflowed 8 MB under ASan). The stack used since the
  // outermost `at` is bounded too: 4 MB, half of a thread's default.
  static constexpr uintptr_t kMaxStackBytes = uintptr_t{4} << 20;
  uintptr_t stackTop = 0; // frame address of the outermost Replayer::at
  uintptr_t stackUsed() const {
    auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    return stackTop > here ? stackTop - here : 0;
  }

  // The slots of "u!3", "k!0", "i!1": looked up once, not per read.
  static uint32_t varSlot(char kind, size_t n) {
    static thread_local std::vector<uint32_t> slots[3];
    auto &v = slots[kind == 'k' ? 0 : kind == 'u' ? 1 : 2];
    while (v.size() <= n)
      v.push_back(Expr::slotOf(std::string(1, kind) + "!" + std::to_string(v.size())));
    return v[n];
  }
  // Sets `slot`, returning what it held before (kUnset: nothing).
  int64_t bind(uint32_t slot, int64_t v) {
    if (slot >= env.size())
      env.resize(slot + 1, Expr::kUnset);
    return std::exchange(env[slot], v);
  }
  void unbind(uint32_t slot, int64_t before) { env[slot] = before; }
  int64_t lookup(uint32_t slot) const { return slot < env.size() ? env[slot] : Expr::kUnset; }
  std::optional<int64_t> value(const Expr &e) { return e.evalSlots(env, apps); }

  // Integer inputs with a value range: deterministic values inside it, the
  // same whether read as a tensor element or as a lookup index.
  std::optional<int64_t> intLeaf(ClassId c, llvm::ArrayRef<int64_t> idx) {
    const ClassInfo &ci = classes[c];
    if (!ci.elements.empty()) {
      if (idx.size() != 1 || idx[0] < 0 || idx[0] >= static_cast<int64_t>(ci.elements.size()))
        return std::nullopt;
      return value(ci.elements[idx[0]]);
    }
    auto lo = value(ci.valueRange->first);
    auto hi = value(ci.valueRange->second);
    if (!lo || !hi || *hi < *lo)
      return std::nullopt;
    if (intOffset)
      return *lo + std::min(*intOffset, *hi - *lo);
    double u = (leaf(ci.label, idx) + 1.0) / 2.0; // in [0, 1]
    return *lo + std::min<int64_t>(*hi - *lo, static_cast<int64_t>(u * static_cast<double>(*hi - *lo + 1)));
  }

  std::optional<int64_t> app(const std::string &fn, const std::vector<int64_t> &args) {
    if (byFunction.empty())
      for (ClassId c = 0; c < classes.size(); ++c)
        if (classes[c].valueRange)
          byFunction["val:" + classes[c].label] = c;
    auto it = byFunction.find(fn);
    return it == byFunction.end() ? std::nullopt : intLeaf(it->second, args);
  }

  int64_t index(const Expr &e) {
    auto v = value(e);
    if (!v)
      incomplete = true;
    return v ? *v : INT64_MIN;
  }

  bool cond(const Expr &e) {
    // A variable the point does not fix (an ignored broadcast index) reads as 0.
    auto v = e.evalSlots(env, apps, /*unknownAsZero=*/true);
    return v.value_or(0) != 0;
  }

  // Class `c`'s dims at these sizes; INT64_MIN where one does not evaluate.
  const llvm::SmallVector<int64_t, 4> &dims(ClassId c) {
    if (c >= dimsOf.size())
      dimsOf.resize(c + 1);
    auto &d = dimsOf[c];
    if (!d) {
      llvm::SmallVector<int64_t, 4> out;
      for (auto &e : classes[c].shape.dims) {
        auto v = value(e);
        out.push_back(v ? *v : INT64_MIN);
      }
      d = std::move(out);
    }
    return *d;
  }

  // Class c's label hash, kept in `table`; `label()` is asked only the first
  // time (a cut class's label is built, and was once built on every read).
  template <typename LabelFn> size_t hashOf(std::vector<std::optional<size_t>> &table, ClassId c, LabelFn label) {
    if (c >= table.size())
      table.resize(c + 1);
    if (!table[c])
      table[c] = std::hash<std::string>()(label());
    return *table[c];
  }

  // Element `idx` of class `c` as a flat index; -1 where a dim does not
  // evaluate (the value is then incomplete and never kept).
  int64_t flatIndex(ClassId c, llvm::ArrayRef<int64_t> idx) {
    const auto &d = dims(c);
    if (d.size() != idx.size())
      return -1;
    int64_t f = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      if (d[i] <= 0 || idx[i] < 0 || idx[i] >= d[i] || __builtin_mul_overflow(f, d[i], &f) ||
          __builtin_add_overflow(f, idx[i], &f))
        return -1;
    return f;
  }
  ClassMemo *memoOf(ClassId c, bool create) {
    if (c >= memo.size()) {
      if (!create)
        return nullptr;
      memo.resize(c + 1);
    }
    if (!memo[c] && create) {
      memo[c] = std::make_unique<ClassMemo>();
      int64_t n = 1;
      for (int64_t d : dims(c))
        if (d <= 0 || __builtin_mul_overflow(n, d, &n) || n > kDenseElements) {
          n = -1;
          break;
        }
      if (n > 0) {
        memo[c]->values.assign(n, 0.0);
        memo[c]->known.assign(n, false);
      }
    }
    return memo[c].get();
  }
  std::optional<double> memoized(ClassId c, int64_t flat) {
    ClassMemo *m = flat < 0 ? nullptr : memoOf(c, false);
    if (!m)
      return std::nullopt;
    if (!m->values.empty())
      return m->known[flat] ? std::optional<double>(m->values[flat]) : std::nullopt;
    auto it = m->sparse.find(flat);
    return it == m->sparse.end() ? std::nullopt : std::optional<double>(it->second);
  }
  void keep(ClassId c, int64_t flat, double v) {
    if (flat < 0)
      return;
    ClassMemo *m = memoOf(c, true);
    if (!m->values.empty()) {
      m->values[flat] = v;
      m->known[flat] = true;
    } else {
      m->sparse[flat] = v;
    }
  }

  static double leaf(const std::string &label, llvm::ArrayRef<int64_t> idx) {
    return leafOf(std::hash<std::string>()(label), idx);
  }
  // The same from the label's hash (kept per class: hashing the label was a
  // tenth of a probe's time).
  static double leafOf(size_t h, llvm::ArrayRef<int64_t> idx) {
    for (auto i : idx)
      h = h * 1000003u ^ std::hash<int64_t>()(i);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return static_cast<double>(h % 2000001) / 1000000.0 - 1.0; // in [-1, 1]
  }

  double read(ClassId c, llvm::ArrayRef<int64_t> idx) {
    const ClassInfo &ci = classes[c];
    const auto &shape = dims(c);
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t dim = d < shape.size() ? shape[d] : INT64_MIN;
      if (dim == INT64_MIN)
        incomplete = true; // as index() would have said
      if (idx[d] < 0 || (dim != INT64_MIN && idx[d] >= dim)) {
        incomplete = true; // out of bounds: the term itself is wrong here
        return NAN;
      }
    }
    if (elementReads && recordedReads < kMaxRecordedReads) {
      Replayer::Element parent = computing.empty() ? Replayer::Element{Replayer::kRoot, {}} : computing.back();
      recordedReads += (*elementReads)[parent].insert({c, std::vector<int64_t>(idx.begin(), idx.end())}).second;
    }
    switch (ci.kind) {
    case ClassInfo::Leaf:
      if (ci.abstractedReference) {
        incomplete = true; // its numbers come from the interpreter, never from here
        return NAN;
      }
      if (ci.valueRange) {
        auto v = intLeaf(c, idx);
        if (!v)
          incomplete = true;
        return v ? static_cast<double>(*v) : NAN;
      }
      if (recordReads)
        recordReads->insert({ci.label, std::vector<int64_t>(idx.begin(), idx.end())});
      if (keepReads && !keepReads->count({ci.label, std::vector<int64_t>(idx.begin(), idx.end())}))
        return leaf(ci.label + "#unread", idx);
      return leafOf(hashOf(labelHash, c, [&]() -> const std::string & { return ci.label; }), idx);
    case ClassInfo::Constant: {
      int64_t flat = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        flat = flat * ci.dataDims[d] + idx[d];
      return flat < static_cast<int64_t>(ci.data.size()) ? ci.data[flat] : NAN;
    }
    case ClassInfo::Compute: {
      if (cut && !isExact(c)) {
        if (c >= readAsCut.size())
          readAsCut.resize(c + 1);
        readAsCut[c] = 1;
        // In [0.5, 1.5]: a cut class is often a normalizer (a sum of
        // exponentials, a variance) that a log, root or division reads; at
        // values in [-1, 1] those gave NaN on both sides, which compares as
        // nothing, and the loss's proposal fell to a second of unfolding.
        return 1.0 + 0.5 * leafOf(hashOf(cutHash, c, [c] { return "#cut" + std::to_string(c); }), idx);
      }
      const int64_t flat = flatIndex(c, idx);
      if (auto v = memoized(c, flat))
        return *v;
      if (depth >= kMaxDepth || stackUsed() > kMaxStackBytes) {
        incomplete = true;
        return NAN;
      }
      // The definition's element names u!d are bound for it and restored
      // after (a Sum restores its own variable), leaving the caller's as they were.
      llvm::SmallVector<int64_t, 4> saved;
      for (size_t d = 0; d < idx.size(); ++d)
        saved.push_back(bind(varSlot('u', d), idx[d]));
      ++depth;
      if (elementReads)
        computing.push_back({c, std::vector<int64_t>(idx.begin(), idx.end())});
      double v = eval(ci.def);
      if (elementReads)
        computing.pop_back();
      --depth;
      for (size_t d = 0; d < idx.size(); ++d)
        unbind(varSlot('u', d), saved[d]);
      if (!incomplete) // a value from a cut-short evaluation is not kept
        keep(c, flat, v);
      return v;
    }
    }
    return NAN;
  }

  double eval(const Term &t) {
    if (budget == 0) {
      incomplete = true;
      return NAN;
    }
    --budget;
    switch (t->kind) {
    case TermKind::Const: return t->value;
    case TermKind::Read: {
      llvm::SmallVector<int64_t, 6> idx;
      for (auto &e : t->idx) {
        int64_t v = index(e);
        if (v == INT64_MIN)
          return NAN;
        idx.push_back(v);
      }
      double v = read(t->cls, idx);
      see(t, {}, v);
      return v;
    }
    case TermKind::Select: return cond(t->cond) ? eval(t->args[0]) : eval(t->args[1]);
    case TermKind::Sum: {
      int64_t lo = index(t->lo), hi = index(t->hi);
      if (lo == INT64_MIN || hi == INT64_MIN || hi - lo > 1000000) {
        incomplete = true;
        return NAN;
      }
      // Not while reads or values are being attributed: a hit would skip them.
      bool memoize = !elementReads && !seenValues;
      SumKey key;
      if (memoize) {
        key.sum = t.get();
        for (uint32_t n : freeVars(t))
          key.values.push_back(lookup(n));
        if (auto it = sumMemo.find(key); it != sumMemo.end())
          return it->second;
      }
      const uint32_t k = varSlot('k', t->level);
      double s = reduceIdentity(t->red);
      const int64_t outer = bind(k, lo);
      for (int64_t v = lo; v < hi; ++v) {
        env[k] = v;
        double x = eval(t->args[0]);
        s = t->red == Fn::Max2 ? std::max(s, x) : t->red == Fn::Min2 ? std::min(s, x) : t->red == Fn::Mul ? s * x : s + x;
      }
      unbind(k, outer);
      see(t, {}, s);
      if (memoize && !incomplete) // a value from a cut-short evaluation is not kept
        sumMemo.emplace(std::move(key), s);
      return s;
    }
    case TermKind::Apply: break;
    }
    llvm::SmallVector<double, 4> a; // on the stack: one per Apply evaluated
    for (auto &x : t->args)
      a.push_back(eval(x));
    double v = apply(t, a);
    see(t, a, v);
    return v;
  }

  double apply(const Term &t, llvm::ArrayRef<double> a) {
    switch (t->fn) {
    case Fn::Add: { double s = 0; for (double x : a) s += x; return s; }
    case Fn::Mul: { double p = 1; for (double x : a) p *= x; return p; }
    case Fn::Recip: return 1.0 / a[0];
    case Fn::Erf: return std::erf(a[0]);
    case Fn::Tanh: return std::tanh(a[0]);
    case Fn::Exp: return std::exp(a[0]);
    case Fn::Log: return std::log(a[0]);
    case Fn::Sqrt: return std::sqrt(a[0]);
    case Fn::Sigmoid: return 1.0 / (1.0 + std::exp(-a[0]));
    case Fn::Relu: return a[0] > 0 ? a[0] : 0;
    case Fn::Abs: return std::fabs(a[0]);
    case Fn::Cos: return std::cos(a[0]);
    case Fn::Sin: return std::sin(a[0]);
    case Fn::Pow: return std::pow(a[0], a[1]);
    case Fn::Max2: return *std::max_element(a.begin(), a.end());
    case Fn::Min2: return *std::min_element(a.begin(), a.end());
    case Fn::Opaque: {
      // Masks, integer Div/Mod, rounding: what the graph computes (ir/OpaqueFns).
      if (auto v = evalOpaque(t->name, std::vector<double>(a.begin(), a.end())))
        return *v;
      // An operator we do not model numerically: a fixed nonlinear function of
      // its arguments, the same on both sides.
      double s = std::hash<std::string>()(t->name) % 97 / 97.0;
      for (double x : a)
        s = std::sin(3 * s + 1.7 * x);
      return s;
    }
    }
    return NAN;
  }
};

} // namespace

struct Replayer::Impl {
  Evaluator e;
};

Replayer::Replayer(const ClassTable &classes, std::map<std::string, int64_t> sizes, std::optional<int64_t> intOffset)
    : impl_(new Impl{Evaluator{classes, std::move(sizes)}}) {
  impl_->e.intOffset = intOffset;
}
Replayer::~Replayer() = default;

double Replayer::at(const Term &t, const std::vector<int64_t> &idx) {
  for (size_t d = 0; d < idx.size(); ++d)
    impl_->e.bind(Evaluator::varSlot('i', d), idx[d]);
  // Stack depth is measured from here (the stack grows down on our targets).
  impl_->e.stackTop = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return impl_->e.eval(t);
}

void Replayer::recordLeafReads(LeafSet *out) { impl_->e.recordReads = out; }
void Replayer::perturbUnread(const LeafSet *keep) { impl_->e.keepReads = keep; }
void Replayer::recordElementReads(ElementReads *out) { impl_->e.elementReads = out; }
void Replayer::recordValues(std::vector<double> *out) { impl_->e.seenValues = out; }
std::optional<double> Replayer::element(const Element &e) const {
  return impl_->e.memoized(e.first, impl_->e.flatIndex(e.first, e.second));
}
bool Replayer::recordedAllReads() const { return impl_->e.recordedReads < Evaluator::kMaxRecordedReads; }

bool Replayer::complete() const { return !impl_->e.incomplete; }
void Replayer::setBudget(uint64_t steps) { impl_->e.budget = steps; }
void Replayer::cutBelow(const std::set<ClassId> &exact) {
  impl_->e.cut = true;
  impl_->e.exact.clear();
  impl_->e.markExact(exact);
}
bool Replayer::widenCut(const std::set<ClassId> &more) {
  Evaluator &e = impl_->e;
  if (!e.cut)
    return true; // nothing is cut: every class is exact already
  for (ClassId c : more)
    if (c < e.readAsCut.size() && e.readAsCut[c] && !e.isExact(c))
      return false; // kept elements read it as a cut leaf: they would disagree
                    // with its exact values
  e.markExact(more);
  return true;
}
uint64_t Replayer::budgetLeft() const { return impl_->e.budget; }
void Replayer::newProbe(uint64_t steps) {
  impl_->e.incomplete = false;
  impl_->e.budget = steps;
}

} // namespace shardproof::relation
