// Private to src/spec: the throwing core shared by the expression parsers and
// the YAML loader. Errors are thrown as ParseFailure inside the layer and turned
// into llvm::Error (userError) at each public entry point, which keeps the many
// small validation helpers free of error plumbing.
#pragma once

#include "shardproof/spec/Spec.h"

#include <string>

namespace shardproof::spec::detail {

struct ParseFailure {
  std::string message;
  SrcLoc loc;
};

[[noreturn]] inline void fail(std::string message, SrcLoc loc) {
  throw ParseFailure{std::move(message), std::move(loc)};
}

/// Location of byte `offset` of an expression whose text starts at `base`.
SrcLoc offsetLoc(const SrcLoc &base, size_t offset);

smt::Expr parseIntExprOrThrow(const std::string &text, const SymbolTable &syms, const SrcLoc &loc);
smt::Expr parseConstraintOrThrow(const std::string &text, const SymbolTable &syms,
                                 const SrcLoc &loc);
RelExpr parseRelationOrThrow(const std::string &text, int worldSize, const SymbolTable &syms,
                             const SrcLoc &loc);

/// Runs `body` and converts any failure it throws into an llvm::Error.
template <typename T, typename F> llvm::Expected<T> guarded(F &&body) {
  try {
    return body();
  } catch (const ParseFailure &f) {
    return userError(f.message, f.loc);
  } catch (const std::exception &e) {
    return internalError(std::string("unexpected exception in spec parser: ") + e.what());
  }
}

} // namespace shardproof::spec::detail
