// Errors that cross layer boundaries. A user error (bad file, bad YAML, unknown
// name) is kept apart from an internal error (a bug in shardproof) and from
// "unsupported" (valid input we cannot reason about yet): they map to different
// exit codes and must never be confused with a verdict.
#pragma once

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace shardproof {

enum class ErrorKind {
  User,        // the input is wrong: exit 3
  Unsupported, // the input is valid but beyond what we can reason about: UNKNOWN
  Internal,    // a bug in shardproof: never a verdict
};

/// Where in a user file an error points. Empty file means "no location".
struct SrcLoc {
  std::string file;
  int line = 0; // 1-based; 0 = unknown
  int col = 0;  // 1-based; 0 = unknown
  std::string str() const;
};

/// The one error payload used across layers.
class Diag : public llvm::ErrorInfo<Diag> {
public:
  static char ID;
  Diag(ErrorKind kind, std::string message, SrcLoc loc = {})
      : kind_(kind), message_(std::move(message)), loc_(std::move(loc)) {}

  ErrorKind kind() const { return kind_; }
  const std::string &text() const { return message_; }
  const SrcLoc &loc() const { return loc_; }

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;

private:
  ErrorKind kind_;
  std::string message_;
  SrcLoc loc_;
};

inline llvm::Error userError(std::string msg, SrcLoc loc = {}) {
  return llvm::make_error<Diag>(ErrorKind::User, std::move(msg), std::move(loc));
}
inline llvm::Error unsupportedError(std::string msg, SrcLoc loc = {}) {
  return llvm::make_error<Diag>(ErrorKind::Unsupported, std::move(msg), std::move(loc));
}
inline llvm::Error internalError(std::string msg) {
  return llvm::make_error<Diag>(ErrorKind::Internal, std::move(msg));
}

/// Renders an error as one line ("file:line:col: error: message") and consumes it.
std::string toString(llvm::Error err);
/// An error taken apart: its kind (of the first payload; Internal for foreign
/// error types) and its rendered text. Consumes the error.
struct TakenError {
  ErrorKind kind = ErrorKind::Internal;
  std::string text;
  /// The first payload's bare message and location, to re-raise it with more
  /// context without repeating "error: ".
  std::string message;
  SrcLoc loc;
};
TakenError takeError(llvm::Error err);

/// Up to `max` names from `candidates` closest to `name` (edit distance),
/// for "did you mean" messages.
std::vector<std::string> nearestNames(const std::string &name,
                                      const std::vector<std::string> &candidates,
                                      unsigned max = 3);
/// "unknown tensor 'x'; did you mean 'y', 'z'?" style suffix, empty if none close.
std::string didYouMean(const std::string &name, const std::vector<std::string> &candidates);

/// Internal invariant check that survives release builds: a broken invariant in
/// verifier logic must never turn into a silent "proved".
[[noreturn]] void internalFailure(const char *file, int line, const std::string &msg);
#define SP_CHECK(cond, msg)                                                    \
  do {                                                                         \
    if (!(cond))                                                               \
      ::shardproof::internalFailure(__FILE__, __LINE__, (msg));                \
  } while (0)

} // namespace shardproof
