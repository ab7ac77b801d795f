// A one-line progress display on stderr for long checks: shown only when
// stderr is a terminal and the run has taken more than a second, redrawn at
// most ten times a second, erased when the check ends.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace shardproof::cli {

class Progress {
public:
  Progress() : start_(Clock::now()), enabled_(::isatty(STDERR_FILENO) == 1) {}
  ~Progress() { finish(); }

  void update(const char *phase, size_t done, size_t total) {
    if (!enabled_)
      return;
    auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(100))
      return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30;
    int filled = total ? static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total)) : 0;
    filled = filled > width ? width : filled;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%-11s [%s] %zu/%zu  %.1f s ", phase, bar.c_str(), done, total, secs);
    std::fflush(stderr);
    shown_ = true;
  }

  /// Erases the line (before the report is printed).
  void finish() {
    if (!shown_)
      return;
    std::fprintf(stderr, "\r%*s\r", 70, "");
    std::fflush(stderr);
    shown_ = false;
  }

private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_, last_;
  bool enabled_;
  bool shown_ = false;
};

} // namespace shardproof::cli
