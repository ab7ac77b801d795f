// Private to src/spec: a recursive-descent parser over the shared tokens for
// integer expressions and boolean constraints. The relation parser drives the
// same token stream and calls parseInt() for keyword-argument values.
#pragma once

#include "Lexer.h"

namespace shardproof::spec::detail {

class ExprParser {
public:
  ExprParser(const std::string &text, const SymbolTable &syms, const SrcLoc &base);

  /// An integer expression starting at the current token (may stop early).
  smt::Expr parseInt();
  /// The whole text as one expression of the given sort. Leftover tokens are
  /// reported before a sort mismatch: "a = 1" is a typo for "==", not an int.
  smt::Expr parseAll(bool wantBoolean);

  const Token &peek(size_t ahead = 0) const;
  Token next();
  bool accept(Tok k);
  /// Consumes a token of kind `k` or fails naming `what` ("')'").
  Token expect(Tok k, const std::string &what);
  /// Fails unless every token has been consumed.
  void expectEnd();
  [[noreturn]] void unexpected(const Token &t) const;
  SrcLoc locOf(const Token &t) const { return offsetLoc(base_, t.offset); }
  std::string column(const Token &t) const { return std::to_string(t.offset + 1); }
  const std::string &text() const { return text_; }

  /// Held across one level of recursion (parentheses, calls, unary operators):
  /// nesting deeper than kMaxNesting is a user error at `at`, not a stack overflow.
  static constexpr unsigned kMaxNesting = 200;
  class Nest {
  public:
    Nest(ExprParser &p, const Token &at);
    ~Nest() { --p_.depth_; }
    Nest(const Nest &) = delete;
    Nest &operator=(const Nest &) = delete;

  private:
    ExprParser &p_;
  };

private:
  // A typed intermediate: parentheses may hold either sort, so the sort is only
  // checked where an operator needs one.
  struct Value {
    smt::Expr expr;
    bool isBool = false;
    size_t offset = 0;
  };
  Value orExpr();
  Value andExpr();
  Value notExpr();
  Value cmpExpr();
  Value addExpr();
  Value mulExpr();
  Value unary();
  Value primary();
  Value call(const Token &fn);
  smt::Expr wantInt(const Value &v) const;
  smt::Expr wantBool(const Value &v) const;
  smt::Expr checked(smt::Expr e, const Token &op) const;
  bool atKeyword(const char *kw) const;

  std::string text_;
  const SymbolTable &syms_;
  SrcLoc base_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  unsigned depth_ = 0;
};

} // namespace shardproof::spec::detail
