#include "shardproof/smt/Solver.h"
#include "smt/Context.h"
#include "smt/Intervals.h"
#include "smt/Repair.h"
#include "smt/Watchdog.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace shardproof::smt {
using detail::ctx;
using detail::fromRaw;
using detail::raw;

static unsigned memoryLimitMb = 0; // as last given to Z3 (0: none)

const char *toString(Result r) {
  switch (r) {
  case Result::Unsat: return "unsat";
  case Result::Sat: return "sat";
  case Result::Unknown: return "unknown";
  case Result::Error: return "error";
  }
  return "error";
}

std::optional<int64_t> Model::get(const std::string &name) const {
  for (auto &[n, v] : values)
    if (n == name)
      return v;
  return std::nullopt;
}

std::optional<int64_t> Model::apply(const std::string &name, const std::vector<int64_t> &args) const {
  for (auto &[n, f] : functions) {
    if (n != name)
      continue;
    for (auto &[at, v] : f.points)
      if (at == args)
        return v;
    return f.otherwise;
  }
  return std::nullopt;
}

std::string Model::str() const {
  std::string s;
  for (auto &[n, v] : values) {
    if (!s.empty())
      s += ", ";
    s += n + "=" + std::to_string(v);
  }
  return s;
}

// The integer entries of a function's interpretation, and its value
// elsewhere when that is an integer; false if some entry is not integers.
static bool readFunction(Z3_context c, Z3_func_interp fi, Model::Function &f) {
  Z3_func_interp_inc_ref(c, fi);
  bool plain = true;
  int64_t x;
  for (unsigned e = 0, ne = Z3_func_interp_get_num_entries(c, fi); e < ne; ++e) {
    Z3_func_entry en = Z3_func_interp_get_entry(c, fi, e);
    Z3_func_entry_inc_ref(c, en);
    std::vector<int64_t> args;
    bool ok = true;
    for (unsigned a = 0, na = Z3_func_entry_get_num_args(c, en); a < na; ++a)
      ok = ok && Z3_get_numeral_int64(c, Z3_func_entry_get_arg(c, en, a), &x) && (args.push_back(x), true);
    if (ok && Z3_get_numeral_int64(c, Z3_func_entry_get_value(c, en), &x))
      f.points.push_back({std::move(args), x});
    else
      plain = false;
    Z3_func_entry_dec_ref(c, en);
  }
  if (Z3_ast els = Z3_func_interp_get_else(c, fi); els && Z3_get_numeral_int64(c, els, &x))
    f.otherwise = x;
  Z3_func_interp_dec_ref(c, fi);
  return plain;
}

struct Solver::Impl {
  detail::Watchdog watchdog;
  bool incremental = true;
  Z3_solver inc = nullptr; // the long-lived solver (incremental mode)
  size_t asserted = 0;     // assumptions asserted into it so far
  /// Models of recent satisfiable queries (most recent first). Each satisfies
  /// every assumption made so far except the set-aside facts; a later query
  /// true in one of them, with those facts' instances at its own points, is
  /// satisfiable (see instancesOf), without Z3.
  struct Witness {
    Z3_model model;
    // Its constants' values, for evaluating without Z3 (complete: false if
    // one is not a machine integer or a boolean).
    std::unordered_map<std::string, int64_t> values;
    // The same by Expr::slotOf (unset: not named, 0 as completed): what the
    // evaluation reads, without hashing a name per variable per query.
    Expr::Slots slots;
    bool complete = true;
    // Its integer functions as tables (a tensor's values, val:x): the points
    // the model lists and the value everywhere else. Absent from `tables`: a
    // function the model does not interpret (0 everywhere, as completed).
    // In `opaque`: one whose table is not plain integers (Z3 evaluates it).
    struct Table {
      std::map<std::vector<int64_t>, int64_t> points;
      int64_t otherwise = 0;
    };
    std::unordered_map<std::string, Table> tables;
    std::set<std::string> opaque;
    std::optional<int64_t> apply(const std::string &fn, const std::vector<int64_t> &args) const {
      if (opaque.count(fn))
        return std::nullopt;
      auto t = tables.find(fn);
      if (t == tables.end())
        return 0;
      auto at = t->second.points.find(args);
      return at == t->second.points.end() ? t->second.otherwise : at->second;
    }
  };
  std::vector<Witness> witnesses;
  static constexpr size_t kWitnesses = 16; // 8 to 32 measured alike at TP8; 64 evaluates too much

  ~Impl() {
    drop();
    forgetWitnesses();
  }
  void drop() {
    if (inc)
      Z3_solver_dec_ref(ctx(), inc);
    inc = nullptr;
    asserted = 0;
  }
  void forgetWitnesses() {
    for (auto &w : witnesses)
      Z3_model_dec_ref(ctx(), w.model);
    witnesses.clear();
  }
  void keepWitness(Z3_model m) {
    if (witnesses.size() == kWitnesses) {
      Z3_model_dec_ref(ctx(), witnesses.back().model);
      witnesses.pop_back();
    }
    Witness w;
    w.model = m;
    Z3_context c = ctx();
    for (unsigned i = 0, n = Z3_model_get_num_consts(c, m); i < n; ++i) {
      Z3_func_decl d = Z3_model_get_const_decl(c, m, i);
      Z3_ast v = Z3_model_get_const_interp(c, m, d);
      int64_t x = 0;
      Z3_lbool b = v ? Z3_get_bool_value(c, v) : Z3_L_UNDEF;
      if (b != Z3_L_UNDEF)
        x = b == Z3_L_TRUE;
      else if (!v || !Z3_get_numeral_int64(c, v, &x)) {
        w.complete = false;
        break;
      }
      std::string name = Z3_get_symbol_string(c, Z3_get_decl_name(c, d));
      if (x == Expr::kUnset) { // reads as unknown by slot: Z3 evaluates this model
        w.complete = false;
        break;
      }
      setSlot(w.slots, name, x);
      w.values[std::move(name)] = x;
    }
    for (unsigned i = 0, n = Z3_model_get_num_funcs(c, m); w.complete && i < n; ++i)
      readTable(c, m, Z3_model_get_func_decl(c, m, i), w);
    witnesses.insert(witnesses.begin(), std::move(w));
  }
  static void setSlot(Expr::Slots &slots, const std::string &name, int64_t x) {
    uint32_t at = Expr::slotOf(name);
    if (at >= slots.size())
      slots.resize(at + 1, Expr::kUnset);
    slots[at] = x;
  }
  // Function `d` of model `m` as a table of integers, or opaque if Z3 keeps
  // it in another form (an else that is an expression, a boolean function).
  static void readTable(Z3_context c, Z3_model m, Z3_func_decl d, Witness &w) {
    std::string name = Z3_get_symbol_string(c, Z3_get_decl_name(c, d));
    Z3_func_interp fi = Z3_model_get_func_interp(c, m, d);
    Model::Function f;
    if (!fi || Z3_get_sort_kind(c, Z3_get_range(c, d)) != Z3_INT_SORT || !readFunction(c, fi, f) || !f.otherwise) {
      w.opaque.insert(std::move(name));
      return;
    }
    Witness::Table t;
    t.otherwise = *f.otherwise;
    for (auto &[args, value] : f.points)
      t.points.emplace(std::move(args), value); // the first entry for a point is the one Z3 uses
    w.tables.emplace(std::move(name), std::move(t));
  }

  /// Does a kept model satisfy `formula` (a query and the instances of the
  /// set-aside facts at its points)? Evaluation is exact: a model completed
  /// for symbols it does not name (new index variables) is still a model of
  /// the assumptions, and one of the set-aside facts once f is moved into its
  /// range away from the formula's points.
  bool witnessed(const Expr &formula, detail::Repairer &repairer) {
    Z3_context c = ctx();
    // Conjunct by conjunct, each on its kept program: a path's conjuncts
    // repeat from query to query, where compiling each whole query again
    // was a tenth of the relation inference's time.
    const std::vector<Expr> parts = detail::conjunctsOf(formula);
    // A variable the values do not name reads as 0 (a model completed).
    auto evaluate = [&](const Expr::Slots &values, const Expr::AppEnv &apps) -> std::optional<bool> {
      bool unknown = false;
      for (const Expr &p : parts) {
        auto v = p.evalSlots(values, apps, /*unknownAsZero=*/true);
        if (!v)
          unknown = true;
        else if (*v == 0)
          return false;
      }
      return unknown ? std::nullopt : std::optional<bool>(true);
    };
    for (size_t i = 0; i < witnesses.size(); ++i) {
      const Witness &w = witnesses[i];
      // Our evaluator first (a constant the model does not name is 0, as
      // completed); Z3's for what it cannot tell (functions, big numbers).
      std::optional<bool> fast;
      if (w.complete)
        fast = evaluate(w.slots, [&](const std::string &fn, const std::vector<int64_t> &args) { return w.apply(fn, args); });
      bool holds = fast && *fast;
      if (!fast) {
        Z3_ast v = nullptr;
        holds = Z3_model_eval(c, w.model, raw(formula), /*model_completion=*/true, &v) && v &&
                Z3_get_bool_value(c, v) == Z3_L_TRUE;
      }
      if (holds) {
        std::rotate(witnesses.begin(), witnesses.begin() + i, witnesses.begin() + i + 1);
        return true;
      }
    }
    // Then each model with its free variables (index variables: no assumption
    // names them) moved inside the bounds the query puts on them (Repair.h),
    // and a set-aside fact's function given the value the query bounds it to
    // at the point it reads (a token id of 512 to 639 where every kept model
    // has 0): the query's instances of the fact are part of `formula`.
    std::vector<const detail::Repairer::Bound *> bounds = repairer.boundsOf(parts);
    std::vector<const detail::Repairer::AppBound *> appBounds = repairer.appBoundsOf(parts);
    if (bounds.empty() && appBounds.empty())
      return false;
    for (size_t i = 0; i < witnesses.size(); ++i) {
      const Witness &w = witnesses[i];
      if (!w.complete)
        continue;
      auto modelValue = [&](const std::string &n) {
        auto it = w.values.find(n);
        return std::optional<int64_t>(it == w.values.end() ? 0 : it->second);
      };
      auto apps = [&](const std::string &fn, const std::vector<int64_t> &args) { return w.apply(fn, args); };
      // Each at the lower end of its bounds, then at the upper end: a query
      // that also denies a disjunction (`not (i < 96 and r <= s or ...)`)
      // is often met at one end and not the other.
      for (bool high : {false, true}) {
        auto moved = detail::Repairer::values(bounds, modelValue, apps, high);
        if (!moved)
          break;
        Expr::Slots env = w.slots;
        bool readable = true;
        for (auto &[n, x] : *moved) {
          readable &= x != Expr::kUnset;
          setSlot(env, n, x);
        }
        if (!readable)
          continue;
        auto envByName = [&](const std::string &n) {
          auto it = moved->find(n);
          return it != moved->end() ? std::optional<int64_t>(it->second) : modelValue(n);
        };
        auto holds = bounds.empty() ? std::nullopt : evaluate(env, apps);
        if (!(holds && *holds) && !appBounds.empty())
          if (auto set = detail::Repairer::appValues(appBounds, envByName, apps, high))
            holds = evaluate(env, [&](const std::string &fn, const std::vector<int64_t> &args) {
              auto it = set->find({fn, args});
              return it != set->end() ? std::optional<int64_t>(it->second) : w.apply(fn, args);
            });
        if (holds && *holds) {
          std::rotate(witnesses.begin(), witnesses.begin() + i, witnesses.begin() + i + 1);
          return true;
        }
      }
    }
    return false;
  }
};

Solver::Solver(unsigned timeoutMs)
    : intervals_(std::make_unique<detail::IntervalProver>()),
      repairer_(std::make_unique<detail::Repairer>(
          [this](const std::string &v) { return !assumedVar(v); },
          [this](const std::string &fn) {
            return !fn.empty() && std::find(factFunction_.begin(), factFunction_.end(), fn) != factFunction_.end();
          })),
      timeoutMs_(timeoutMs) {}
Solver::~Solver() = default;

bool Solver::assumedVar(const std::string &v) {
  for (; assumedVarsSeen_ < assumptions_.size(); ++assumedVarsSeen_)
    for (std::string &n : assumptions_[assumedVarsSeen_].vars())
      assumedVars_.insert(std::move(n));
  return assumedVars_.count(v) > 0;
}

void Solver::assume(const Expr &fact) {
  // A fact that applies a function another fact is set aside for would break
  // the independence that lets queries skip that one: all of them go global.
  if (std::any_of(factFunction_.begin(), factFunction_.end(), [](auto &f) { return !f.empty(); })) {
    std::map<std::string, unsigned> applied = fact.functions();
    for (auto &fn : factFunction_)
      if (!fn.empty() && applied.count(fn))
        fn.clear();
  }
  assumptions_.push_back(fact);
  factFunction_.emplace_back();
  repairer_->clear(); // the fact may name a variable parsed as free
  facts_.learn(fact);
  assumptionDegree_ = std::max(assumptionDegree_, fact.degree());
  cache_.clear();
  if (impl_)
    impl_->forgetWitnesses(); // models of fewer facts
}

void Solver::assumeOnFunction(const Expr &fact, const std::string &fn, const Expr &satisfiable) {
  bool aside = prove("assume.satisfiable", satisfiable, false).proved();
  for (auto &a : assumptions_)
    aside = aside && !a.functions().count(fn);
  assume(fact);
  if (aside)
    factFunction_.back() = fn;
}

// Every application of the function `fn` in `a` (shared subterms once).
// `quantified` is set if `a` has a quantifier (whose applications are not points).
static void applicationsOf(Z3_ast a, const std::string &fn, detail::AstIdSet &seen, std::vector<Z3_app> &out,
                           bool &quantified) {
  Z3_context c = ctx();
  unsigned n;
  {
    const detail::NodeInfo &nd = detail::node(a);
    quantified |= nd.kind == Z3_QUANTIFIER_AST;
    if (nd.kind != Z3_APP_AST || !seen.insert(nd.id).second)
      return;
    n = nd.numArgs;
    if (n > 0 && nd.op == Z3_OP_UNINTERPRETED && fn == detail::appName(a))
      out.push_back(Z3_to_app(c, a));
  }
  for (unsigned i = 0; i < n; ++i)
    applicationsOf(detail::argAt(a, i), fn, seen, out, quantified);
}

// The set-aside fact `forall q. body(q)` at the points where `formula` applies
// its function: body(args) for each application f(args). Equisatisfiable with
// the forall itself, because the fact is pointwise (it constrains f(q) by q and
// the sizes alone) and met by some value at every point (assumeOnFunction
// proved that): a model of the instances becomes a model of the forall by
// giving f that value everywhere the formula does not look. Quantifier-free,
// such a query takes a fifth of the time.
static Expr instancesOf(const Expr &fact, const Expr &formula, const std::string &fn) {
  Z3_context c = ctx();
  Z3_ast q = raw(fact);
  if (Z3_get_ast_kind(c, q) != Z3_QUANTIFIER_AST || !Z3_is_quantifier_forall(c, q))
    return fact;
  unsigned bound = Z3_get_quantifier_num_bound(c, q);
  Z3_ast body = Z3_get_quantifier_body(c, q);
  detail::AstIdSet seen;
  std::vector<Z3_app> apps;
  bool quantified = false;
  applicationsOf(raw(formula), fn, seen, apps, quantified);
  if (quantified)
    return fact;
  std::vector<Expr> parts;
  for (Z3_app app : apps) {
    if (Z3_get_app_num_args(c, app) != bound)
      return fact; // not the shape assumeOnFunction builds: the forall itself
    // De Bruijn index i names the i-th bound variable counted from the last.
    std::vector<Z3_ast> to(bound);
    for (unsigned i = 0; i < bound; ++i)
      to[i] = Z3_get_app_arg(c, app, bound - 1 - i);
    parts.push_back(fromRaw(Z3_substitute_vars(c, body, bound, to.data())));
  }
  return conj(parts);
}

// The facts set aside for the functions `formula` applies, as their instances
// at the formula's points.
static Expr factsFor(const Expr &formula, const std::vector<Expr> &facts, const std::vector<std::string> &about) {
  if (std::all_of(about.begin(), about.end(), [](auto &f) { return f.empty(); }))
    return Expr::boolConst(true);
  std::map<std::string, unsigned> used = formula.functions(); // one walk, shared subterms once
  std::vector<Expr> parts;
  for (size_t i = 0; i < facts.size(); ++i)
    if (!about[i].empty() && used.count(about[i]))
      parts.push_back(instancesOf(facts[i], formula, about[i]));
  return conj(parts);
}

double Solver::totalSeconds() const {
  double s = 0;
  for (auto &[_, q] : stats_)
    s += q.seconds;
  return s;
}

unsigned Solver::totalQueries() const {
  unsigned n = 0;
  for (auto &[_, s] : stats_)
    n += s.sat + s.unsat + s.unknown + s.error;
  return n;
}

static Model extractModel(Z3_context c, Z3_model m) {
  Model out;
  for (unsigned i = 0, n = Z3_model_get_num_consts(c, m); i < n; ++i) {
    Z3_func_decl d = Z3_model_get_const_decl(c, m, i);
    // Only named integer constants: skips Z3's internal div0/mod0 functions.
    if (Z3_get_arity(c, d) != 0 || Z3_get_sort_kind(c, Z3_get_range(c, d)) != Z3_INT_SORT)
      continue;
    Z3_ast v = Z3_model_get_const_interp(c, m, d);
    int64_t x;
    if (v && Z3_get_numeral_int64(c, v, &x))
      out.values.push_back({Z3_get_symbol_string(c, Z3_get_decl_name(c, d)), x});
  }
  std::sort(out.values.begin(), out.values.end());
  for (unsigned i = 0, n = Z3_model_get_num_funcs(c, m); i < n; ++i) {
    Z3_func_decl d = Z3_model_get_func_decl(c, m, i);
    if (Z3_get_sort_kind(c, Z3_get_range(c, d)) != Z3_INT_SORT)
      continue;
    std::string name = Z3_get_symbol_string(c, Z3_get_decl_name(c, d));
    if (name.find('!') != std::string::npos)
      continue; // Z3's own helpers (div0!, mod0!)
    Z3_func_interp fi = Z3_model_get_func_interp(c, m, d);
    if (!fi)
      continue;
    Model::Function f;
    readFunction(c, fi, f);
    out.functions.push_back({name, std::move(f)});
  }
  return out;
}

void Solver::dump(const std::string &name, const Expr &formula) {
  if (dumpDir_.empty())
    return;
  std::error_code ec;
  std::filesystem::create_directories(dumpDir_, ec);
  std::string safe;
  for (char ch : name)
    safe += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_') ? ch : '_';
  std::ostringstream path;
  path << dumpDir_ << "/" << (++dumpCounter_) << "-" << safe << ".smt2";
  std::ofstream f(path.str());
  f << "; query: " << name << "\n";
  std::set<std::string> vars;
  for (auto &a : assumptions_)
    for (auto &v : a.vars())
      vars.insert(v);
  for (auto &v : formula.vars())
    vars.insert(v);
  for (auto &v : vars)
    f << "(declare-const |" << v << "| Int)\n";
  std::map<std::string, unsigned> fns = formula.functions();
  for (auto &a : assumptions_)
    fns.merge(a.functions());
  for (auto &[fn, arity] : fns) {
    f << "(declare-fun |" << fn << "| (";
    for (unsigned i = 0; i < arity; ++i)
      f << (i ? " Int" : "Int");
    f << ") Int)\n";
  }
  for (auto &a : assumptions_)
    f << "(assert " << a.smtlib() << ")\n";
  f << "(assert " << formula.smtlib() << ")\n(check-sat)\n(get-model)\n";
}

namespace {
struct Outcome {
  Z3_lbool res = Z3_L_UNDEF;
  bool timedOut = false;
  Model model;
  std::string reason;
};

// One check of `formula` on `s` (assumptions already in it); reads the model or
// the reason while the solver still holds them.
// `keep`: on Sat without `wantModel`, Z3's model itself (referenced), for the witness cache.
Outcome checkOn(Z3_context c, Z3_solver s, detail::Watchdog &dog, const Expr &formula, unsigned timeoutMs,
                bool scoped, bool wantModel, Z3_model *keep = nullptr) {
  Outcome o;
  if (scoped)
    Z3_solver_push(c, s);
  // Z3 4.8 lets some C++ exceptions escape its C API (std::length_error from
  // a vector sized by a constant near 2^60): an undecided query, not an abort.
  try {
    Z3_solver_assert(c, s, raw(formula));
    o.res = dog.check(c, s, timeoutMs, o.timedOut);
    if (o.res == Z3_L_TRUE && wantModel && !detail::memoryOut()) {
      Z3_model m = Z3_solver_get_model(c, s);
      Z3_model_inc_ref(c, m);
      o.model = extractModel(c, m);
      Z3_model_dec_ref(c, m);
    } else if (o.res == Z3_L_TRUE && keep && !detail::memoryOut()) {
      *keep = Z3_solver_get_model(c, s);
      if (*keep)
        Z3_model_inc_ref(c, *keep);
    } else if (o.res == Z3_L_UNDEF) {
      o.reason = Z3_solver_get_reason_unknown(c, s);
    }
  } catch (const std::exception &e) {
    o = Outcome{};
    o.reason = std::string("the solver failed (") + e.what() + "; sizes too large for it?)";
  }
  if (scoped)
    Z3_solver_pop(c, s, 1);
  return o;
}
} // namespace

void Solver::setIncremental(bool on) {
  if (!impl_)
    impl_ = std::make_unique<Impl>();
  impl_->incremental = on;
  impl_->drop();
}

CheckResult Solver::run(const std::string &name, const Expr &formula, bool freshSolver, bool wantModel) {
  CheckResult r = runUncounted(name, formula, freshSolver, wantModel);
  if (r.result == Result::Unknown || r.result == Result::Error)
    ++undecided_;
  return r;
}

CheckResult Solver::runUncounted(const std::string &name, const Expr &formula, bool freshSolver, bool wantModel) {
  CheckResult r;
  auto &st = stats_[name];
  if (!formula.isValid()) {
    r.result = Result::Error;
    r.reason = "invalid expression (an undefined operation such as division by zero)";
    ++st.error;
    return r;
  }
  for (auto &a : assumptions_)
    if (!a.isValid()) {
      r.result = Result::Error;
      r.reason = "invalid assumption";
      ++st.error;
      return r;
    }
  // An answer given under these assumptions (assume() clears the cache) passed
  // the degree check below: the walk over the formula is not repeated for it.
  if (memo_)
    if (auto it = cache_.find(formula.id());
        it != cache_.end() && it->second.formula.same(formula) && (it->second.hasModel || !wantModel)) {
      ++st.cached;
      ++cacheHits_;
      return it->second.result;
    }
  // Z3 4.8 does not answer its interrupt while it expands a polynomial of a
  // high degree (n^64 ran past every timeout and budget): such a query is
  // not asked. No size arithmetic of a real model comes near this degree.
  if (unsigned deg = std::max(assumptionDegree_, formula.degree()); deg > kMaxDegree) {
    r.result = Result::Unknown;
    r.reason = "a polynomial of degree " + std::to_string(deg) + " in the sizes (more than " +
               std::to_string(kMaxDegree) + "), which the solver cannot be interrupted on; not asked";
    ++st.unknown;
    return r;
  }
  dump(name, formula);
  auto t0 = std::chrono::steady_clock::now();
  // The per-query timeout, cut down to what the total budget has left.
  unsigned timeoutMs = timeoutMs_;
  bool budgetBound = false;
  if (deadline_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - t0).count();
    if (left <= 0) {
      r.result = Result::Unknown;
      r.reason = budgetMessage();
      if (firstCut_.empty())
        firstCut_ = name;
      ++st.unknown;
      return r;
    }
    if (static_cast<unsigned long long>(left) < timeoutMs) {
      timeoutMs = static_cast<unsigned>(left);
      budgetBound = true;
    }
  }
  if (timeoutMs == 0) {
    // No time at all: not even a query Z3 would answer before our watchdog
    // wakes up counts (that race made --solver-timeout 0 depend on the load).
    r.result = Result::Unknown;
    r.reason = "solver timeout after 0 ms";
    ++st.unknown;
    return r;
  }
  if (!impl_)
    impl_ = std::make_unique<Impl>();
  Impl &I = *impl_;
  detail::resetMemoryOut();
  Z3_context c = ctx();
  Outcome o;
  // The goal prove() asks, by cases and the functions' ranges, before Z3.
  // `aside`: the set-aside facts at the formula's points if already made
  // (the goal applies the same functions at the same points).
  bool casesTried = false;
  auto byCases = [&](const Expr *aside) {
    if (casesTried || !proving_)
      return false;
    casesTried = true;
    const Expr &goal = *proving_;
    if (!intervals_->provesByCases(goal, facts_, [&] {
          return aside ? *aside : factsFor(goal, assumptions_, factFunction_);
        }))
      return false;
    r.result = Result::Unsat;
    ++st.byIntervals;
    ++byIntervals_;
    if (memo_)
      cache_[formula.id()] = {formula, r, true};
    st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
  };
  // A query that wants a model gets a fresh solver: the incremental one's
  // model would depend on the queries before it (and so on --jobs).
  bool fresh = !I.incremental || freshSolver || wantModel;
  if (!fresh) {
    if (!I.inc) {
      I.inc = Z3_mk_simple_solver(c);
      Z3_solver_inc_ref(c, I.inc);
    }
    // Facts about functions the formula does not apply stay out (quantifiers
    // slow every query down); those it applies join it in the query's scope.
    for (; I.asserted < assumptions_.size(); ++I.asserted)
      if (factFunction_[I.asserted].empty())
        Z3_solver_assert(c, I.inc, raw(assumptions_[I.asserted]));
    Expr aside = factsFor(formula, assumptions_, factFunction_);
    // A query a recent model satisfies is Sat (most queries that simplify
    // index conditions are: the path allows both sides of the condition).
    // The instances join the evaluation: a kept model need not keep f in its
    // range at the points this formula reads.
    if (memo_ && !wantModel && I.witnessed(formula && aside, *repairer_)) {
      r.result = Result::Sat;
      ++st.witnessed;
      ++witnessed_;
      cache_[formula.id()] = {formula, r, false};
      st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
    if (byCases(&aside))
      return r;
    Z3_model kept = nullptr;
    o = checkOn(c, I.inc, I.watchdog, formula && aside, timeoutMs, /*scoped=*/true, wantModel,
                memo_ && !wantModel ? &kept : nullptr);
    if (kept)
      I.keepWitness(kept);
    if (o.res == Z3_L_UNDEF) {
      // A canceled solver is not reused, and an incomplete answer of the
      // incremental core is asked again of a fresh solver (its tactics for
      // nonlinear goals differ) with the time left: never a weaker answer.
      I.drop();
      auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      if (!o.timedOut && !detail::memoryOut() && static_cast<unsigned long long>(spent) < timeoutMs) {
        timeoutMs -= static_cast<unsigned>(spent);
        fresh = true;
      }
    }
  }
  if (fresh) {
    if (byCases(nullptr))
      return r;
    Z3_solver s = Z3_mk_solver(c);
    Z3_solver_inc_ref(c, s);
    for (auto &a : assumptions_)
      Z3_solver_assert(c, s, raw(a));
    o = checkOn(c, s, I.watchdog, formula, timeoutMs, /*scoped=*/false, wantModel);
    Z3_solver_dec_ref(c, s);
  }
  bool memoryOut = detail::memoryOut();
  bool cacheable = true;
  if (o.res == Z3_L_FALSE) {
    r.result = Result::Unsat;
    ++st.unsat;
  } else if (o.res == Z3_L_TRUE && !memoryOut) {
    r.result = Result::Sat;
    r.model = std::move(o.model);
    ++st.sat;
  } else {
    r.result = Result::Unknown;
    r.reason = memoryOut ? "" : o.reason;
    bool memLimit = memoryOut || r.reason.find("memory") != std::string::npos;
    // Only a plain timeout is the same answer next time; a memory cap or a
    // budget cut depend on the moment.
    cacheable = false;
    if (memLimit) {
      r.reason = "solver memory limit of " + std::to_string(memoryLimitMb) + " MB reached";
    } else if (o.timedOut && budgetBound) {
      r.reason = budgetMessage();
      if (firstCut_.empty())
        firstCut_ = name;
    } else if (o.timedOut || r.reason == "canceled" || r.reason == "timeout") {
      r.reason = "solver timeout after " + std::to_string(timeoutMs_) + " ms";
      cacheable = true;
    }
    ++st.unknown;
  }
  if (memo_ && cacheable)
    cache_[formula.id()] = {formula, r, wantModel || r.result != Result::Sat};
  st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void Solver::setDeadline(std::chrono::steady_clock::time_point deadline, std::string what) {
  deadline_ = deadline;
  budgetWhat_ = std::move(what);
}

bool Solver::pastDeadline() const { return deadline_ && std::chrono::steady_clock::now() >= *deadline_; }

std::string Solver::budgetMessage() const { return deadline_ ? budgetWhat_ + " exhausted" : ""; }

void Solver::setMemoryLimitMb(unsigned mb) {
  // The context and its sorts first: made under a cap already exceeded, they
  // would be null.
  (void)ctx();
  (void)detail::intSort();
  (void)detail::boolSort();
  memoryLimitMb = mb;
  Z3_global_param_set("memory_max_size", std::to_string(mb).c_str());
}

CheckResult Solver::check(const std::string &name, const Expr &given, bool wantModel) {
  Expr formula = facts_.apply(given); // equivalent under the assumptions
  if (auto b = formula.asBool(); b && !*b) {
    ++stats_[name].trivial;
    return {Result::Unsat, {}, ""};
  }
  return run(name, formula, false, wantModel);
}

Proof Solver::prove(const std::string &name, const Expr &given, bool wantCounterexample) {
  Proof p;
  Expr goal = facts_.apply(given); // equivalent under the assumptions
  if (auto b = goal.asBool(); b && *b) {
    ++stats_[name].trivial;
    p.status = Proof::Proved;
    return p;
  }
  if (intervals_->proves(goal, facts_)) {
    ++stats_[name].byIntervals;
    ++byIntervals_;
    p.status = Proof::Proved;
    return p;
  }
  proving_ = &goal; // run() tries it by cases once no kept model refutes it
  CheckResult r = run(name, !goal, false, wantCounterexample);
  proving_ = nullptr;
  switch (r.result) {
  case Result::Unsat: p.status = Proof::Proved; break;
  case Result::Sat:
    p.status = Proof::Refuted;
    p.counterexample = r.model;
    break;
  default:
    p.status = Proof::Unknown;
    p.reason = r.reason;
    break;
  }
  return p;
}

Model Solver::shrink(const std::string &name, const Expr &formula, const Model &start,
                     const std::vector<std::string> &vars) {
  // Greedy lexicographic minimisation: for each variable, find by bisection the
  // smallest value that keeps `formula` satisfiable, then pin it.
  Model best = start;
  Expr pinned = formula;
  for (const auto &v : vars) {
    auto cur = best.get(v);
    if (!cur)
      continue;
    Expr var = Expr::intVar(v);
    int64_t hi = *cur;
    int64_t lo = std::min<int64_t>(hi, 0);
    // Lower end: the smallest value we bother trying; sizes are rarely negative.
    unsigned budget = 24;
    // Over a range the budget bisects exactly, whether a smaller value exists
    // needs no model: asked without one, of the incremental solver (no fresh
    // solver with every assumption per step, 5 ms each). A wider range takes
    // each model's value as the next upper end, to finish within the budget.
    const bool exact = hi - lo <= (int64_t{1} << 20);
    bool moved = false;
    while (lo < hi && budget--) {
      int64_t mid = lo + (hi - lo) / 2;
      CheckResult r = run(name + ".shrink", pinned && var <= Expr::intConst(mid), false, /*wantModel=*/!exact);
      if (r.result == Result::Sat) {
        if (exact) {
          hi = mid;
          moved = true;
        } else {
          best = r.model;
          hi = *best.get(v);
        }
      } else if (r.result == Result::Unsat) {
        lo = mid + 1;
      } else {
        break;
      }
    }
    pinned = pinned && var == Expr::intConst(hi);
    // The next variable starts from `best`'s value, which must agree with the
    // values pinned so far.
    if (moved && &v != &vars.back()) {
      CheckResult r = run(name + ".shrink", pinned);
      if (r.result != Result::Sat)
        break;
      best = r.model;
    }
  }
  // One final model with every variable pinned, so the values are consistent;
  // from a fresh solver, so the report does not depend on earlier queries.
  CheckResult r = run(name + ".shrink", pinned, /*freshSolver=*/true);
  if (r.result == Result::Sat)
    return r.model;
  return best;
}

} // namespace shardproof::smt
