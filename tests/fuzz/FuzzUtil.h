// Shared by the fuzz targets: reading the fuzz bytes as choices, and turning
// anything that must never happen into a crash libFuzzer records.
#pragma once

#include "shardproof/support/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace shardproof::fuzz {

/// A finding that no sanitizer sees (an internal error, a broken property):
/// print it and abort, so libFuzzer saves the input and the replayer fails.
[[noreturn]] inline void finding(const std::string &what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// User errors and "unsupported" are fine answers to garbage; an internal
/// error is a bug.
inline void rejectInternal(llvm::Error e, const char *stage) {
  if (!e)
    return;
  TakenError t = takeError(std::move(e));
  if (t.kind == ErrorKind::Internal)
    finding(std::string(stage) + " reported an internal error: " + t.text);
}

/// The fuzz input read as a stream of small choices; past the end every
/// choice is 0, so any input describes a complete (small) case.
class Choices {
public:
  Choices(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}
  uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  /// A value in [0, n).
  unsigned pick(unsigned n) { return n ? byte() % n : 0; }
  bool flag() { return byte() & 1; }
  bool done() const { return p_ >= end_; }
  /// What is left, as text.
  std::string rest() {
    std::string s(reinterpret_cast<const char *>(p_), static_cast<size_t>(end_ - p_));
    p_ = end_;
    return s;
  }

private:
  const uint8_t *p_, *end_;
};

} // namespace shardproof::fuzz
