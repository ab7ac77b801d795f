// Internal to smt/: the deadline of a Z3 check, enforced by us. Z3's own
// "timeout" parameter can deadlock in 4.8.12 when it fires under load (seen: a
// 1 ms timeout hanging for minutes with several processes on 2 cores), so a
// thread interrupts the solver, repeatedly, until the check returns. One
// long-lived thread per Watchdog (started on first use), not one per query.
#pragma once

#include <z3.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace shardproof::smt::detail {

class Watchdog {
public:
  Watchdog() = default;
  ~Watchdog() {
    if (!thread_.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// Z3_solver_check on `s`, interrupted after `timeoutMs`; `timedOut` says
  /// whether the interrupt fired.
  Z3_lbool check(Z3_context c, Z3_solver s, unsigned timeoutMs, bool &timedOut) {
    if (!thread_.joinable())
      thread_ = std::thread([this] { loop(); });
    {
      std::lock_guard<std::mutex> lock(m_);
      c_ = c;
      s_ = s;
      deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
      armed_ = true;
      fired_ = false;
    }
    cv_.notify_all();
    Z3_lbool res = Z3_solver_check(c, s);
    {
      std::lock_guard<std::mutex> lock(m_);
      armed_ = false;
      timedOut = fired_;
    }
    return res;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() < deadline_) {
        cv_.wait_until(lock, deadline_);
        continue;
      }
      fired_ = true;
      Z3_solver_interrupt(c_, s_);
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false, fired_ = false;
  Z3_context c_ = nullptr;
  Z3_solver s_ = nullptr;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

} // namespace shardproof::smt::detail
