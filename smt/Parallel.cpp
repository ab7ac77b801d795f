// Solver::provePrefetch: independent goals proved on several threads. Z3
// contexts are not thread-safe, so each worker has its own context, into which
// the main thread translates the assumptions and the goals before the workers
// start; the workers only report which goals they proved (unsat negation), and
// those enter the main solver's result cache. Everything else is asked again by
// the caller on the main solver, so results never depend on the thread count.
#include "shardproof/smt/Solver.h"
#include "smt/Context.h"
#include "smt/Watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <unordered_set>

namespace shardproof::smt {

using detail::fromRaw;
using detail::raw;

namespace {

thread_local bool workerError = false;
void onWorkerError(Z3_context, Z3_error_code) { workerError = true; }

struct Worker {
  Z3_context c = nullptr;
  std::vector<Z3_ast> assumptions, goals; // goals[i] = the i-th formula, translated

  explicit Worker(Z3_context from, const std::vector<Expr> &assume, const std::vector<Expr> &formulas) {
    Z3_config cfg = Z3_mk_config();
    Z3_set_param_value(cfg, "model", "false");
    c = Z3_mk_context_rc(cfg);
    Z3_del_config(cfg);
    Z3_set_error_handler(c, onWorkerError);
    for (auto &a : assume)
      assumptions.push_back(keep(Z3_translate(from, raw(a), c)));
    for (auto &f : formulas)
      goals.push_back(keep(Z3_translate(from, raw(f), c)));
  }
  ~Worker() {
    for (auto *v : {&assumptions, &goals})
      for (Z3_ast a : *v)
        if (a)
          Z3_dec_ref(c, a);
    Z3_del_context(c);
  }
  Z3_ast keep(Z3_ast a) {
    if (a)
      Z3_inc_ref(c, a);
    return a;
  }

  Z3_solver fresh(bool simple) {
    Z3_solver s = simple ? Z3_mk_simple_solver(c) : Z3_mk_solver(c);
    Z3_solver_inc_ref(c, s);
    for (Z3_ast a : assumptions)
      Z3_solver_assert(c, s, a);
    return s;
  }

  // Same procedure as Solver::run: the incremental solver first, a fresh
  // default solver for an incomplete answer.
  void run(std::atomic<size_t> &next, std::vector<char> &proved, unsigned timeoutMs) {
    workerError = false;
    detail::Watchdog dog;
    Z3_solver inc = nullptr;
    for (size_t i; (i = next.fetch_add(1)) < goals.size();) {
      if (!goals[i])
        continue;
      auto t0 = std::chrono::steady_clock::now();
      if (!inc)
        inc = fresh(true);
      workerError = false;
      Z3_solver_push(c, inc);
      Z3_solver_assert(c, inc, goals[i]);
      bool timedOut = false;
      Z3_lbool res = dog.check(c, inc, timeoutMs, timedOut);
      Z3_solver_pop(c, inc, 1);
      if (res == Z3_L_UNDEF) {
        Z3_solver_dec_ref(c, inc);
        inc = nullptr;
        auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        if (!timedOut && !workerError && static_cast<unsigned long long>(spent) < timeoutMs) {
          Z3_solver s = fresh(false);
          Z3_solver_assert(c, s, goals[i]);
          res = dog.check(c, s, timeoutMs - static_cast<unsigned>(spent), timedOut);
          Z3_solver_dec_ref(c, s);
        }
      }
      proved[i] = res == Z3_L_FALSE && !workerError;
    }
    if (inc)
      Z3_solver_dec_ref(c, inc);
  }
};

} // namespace

unsigned Solver::provePrefetch(const std::string &name, const std::vector<Expr> &goals, unsigned jobs) {
  if (jobs < 2 || !memo_ || pastDeadline())
    return 0;
  for (auto &a : assumptions_)
    if (!a.isValid())
      return 0;
  std::vector<Expr> todo;
  std::unordered_set<unsigned> seen;
  for (auto &g : goals) {
    if (!g.isValid() || g.asBool())
      continue;
    Expr applied = facts_.apply(g); // as prove() will ask it
    if (applied.asBool())
      continue;
    Expr f = !applied;
    if (!f.isValid() || cache_.count(f.id()) || !seen.insert(f.id()).second)
      continue;
    todo.push_back(f);
  }
  if (todo.size() < 2)
    return 0;
  unsigned timeoutMs = timeoutMs_;
  if (deadline_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return 0;
    timeoutMs = static_cast<unsigned>(std::min<long long>(timeoutMs, left.count()));
  }
  if (timeoutMs == 0)
    return 0;
  for (auto &f : todo)
    dump(name, f);
  auto t0 = std::chrono::steady_clock::now();
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, todo.size()));
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned w = 0; w < jobs; ++w)
    workers.push_back(std::make_unique<Worker>(detail::ctx(), assumptions_, todo));
  std::atomic<size_t> next{0};
  std::vector<char> proved(todo.size(), 0);
  std::vector<std::thread> threads;
  for (auto &w : workers)
    threads.emplace_back([&, wp = w.get()] { wp->run(next, proved, timeoutMs); });
  for (auto &t : threads)
    t.join();
  workers.clear();
  unsigned n = 0;
  for (size_t i = 0; i < todo.size(); ++i)
    if (proved[i]) {
      cache_[todo[i].id()] = {todo[i], CheckResult{Result::Unsat, {}, ""}, true};
      ++n;
    }
  auto &st = stats_[name + ".parallel"];
  st.unsat += n;
  st.unknown += static_cast<unsigned>(todo.size()) - n;
  st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return n;
}

} // namespace shardproof::smt
