// Integer expressions and boolean constraints.
//
//   or   := and (('or' | '||') and)*
//   and  := not (('and' | '&&') not)*
//   not  := ('not' | '!') not | cmp
//   cmp  := add (CMPOP add)*          a < b <= c means a < b and b <= c
//   add  := mul (('+' | '-') mul)*
//   mul  := unary (('*' | '//' | '%') unary)*
//   unary:= '-' unary | '+' unary | primary
//   primary := INT | NAME | FN '(' or (',' or)* ')' | '(' or ')'
#include "ExprParser.h"

namespace shardproof::spec::detail {

using smt::Expr;

ExprParser::ExprParser(const std::string &text, const SymbolTable &syms, const SrcLoc &base)
    : text_(text), syms_(syms), base_(base), toks_(lex(text, base)) {}

const Token &ExprParser::peek(size_t ahead) const {
  size_t i = pos_ + ahead;
  return i < toks_.size() ? toks_[i] : toks_.back();
}

Token ExprParser::next() {
  Token t = peek();
  if (pos_ + 1 < toks_.size())
    ++pos_;
  return t;
}

bool ExprParser::accept(Tok k) {
  if (peek().kind != k)
    return false;
  next();
  return true;
}

Token ExprParser::expect(Tok k, const std::string &what) {
  if (peek().kind != k) {
    const Token &t = peek();
    fail("expected " + what + " at column " + column(t) + ", found " + describe(t), locOf(t));
  }
  return next();
}

void ExprParser::expectEnd() {
  if (peek().kind != Tok::End)
    unexpected(peek());
}

void ExprParser::unexpected(const Token &t) const {
  if (t.kind == Tok::End)
    fail("unexpected end of expression at column " + column(t), locOf(t));
  if (t.kind == Tok::Slash)
    fail("'/' at column " + column(t) + " is not supported; use '//' for floor division",
         locOf(t));
  if (t.kind == Tok::Assign)
    fail("unexpected token '=' at column " + column(t) + "; use '==' to compare", locOf(t));
  fail("unexpected " + describe(t) + " at column " + column(t), locOf(t));
}

ExprParser::Nest::Nest(ExprParser &p, const Token &at) : p_(p) {
  if (++p_.depth_ > kMaxNesting) {
    --p_.depth_;
    fail("expression nested more than " + std::to_string(kMaxNesting) + " levels deep at column " +
             p_.column(at),
         p_.locOf(at));
  }
}

bool ExprParser::atKeyword(const char *kw) const {
  return peek().kind == Tok::Ident && peek().text == kw;
}

static bool isKeyword(const std::string &s) { return s == "and" || s == "or" || s == "not"; }

Expr ExprParser::wantInt(const Value &v) const {
  if (v.isBool)
    fail("expected an integer expression at column " + std::to_string(v.offset + 1) +
             ", found a condition",
         offsetLoc(base_, v.offset));
  return v.expr;
}

Expr ExprParser::wantBool(const Value &v) const {
  if (!v.isBool)
    fail("expected a condition (a comparison such as 'seq % 2 == 0') at column " +
             std::to_string(v.offset + 1) + ", found an integer expression",
         offsetLoc(base_, v.offset));
  return v.expr;
}

Expr ExprParser::checked(Expr e, const Token &op) const {
  // The smt builders return an invalid Expr only for a constant zero divisor.
  if (!e.isValid())
    fail("division by zero at column " + column(op), locOf(op));
  return e;
}

Expr ExprParser::parseInt() { return wantInt(orExpr()); }

Expr ExprParser::parseAll(bool wantBoolean) {
  if (peek().kind == Tok::End)
    fail(wantBoolean ? "empty condition" : "empty integer expression", locOf(peek()));
  Value v = orExpr();
  expectEnd();
  return wantBoolean ? wantBool(v) : wantInt(v);
}

ExprParser::Value ExprParser::orExpr() {
  Value lhs = andExpr();
  while (atKeyword("or") || peek().kind == Tok::OrOr) {
    next();
    Value rhs = andExpr();
    lhs.expr = wantBool(lhs) || wantBool(rhs);
  }
  return lhs;
}

ExprParser::Value ExprParser::andExpr() {
  Value lhs = notExpr();
  while (atKeyword("and") || peek().kind == Tok::AndAnd) {
    next();
    Value rhs = notExpr();
    lhs.expr = wantBool(lhs) && wantBool(rhs);
  }
  return lhs;
}

ExprParser::Value ExprParser::notExpr() {
  if (atKeyword("not") || peek().kind == Tok::Bang) {
    Nest nest(*this, peek());
    size_t off = next().offset;
    Value v = notExpr();
    return {!wantBool(v), true, off};
  }
  return cmpExpr();
}

static bool isCmp(Tok k) {
  return k == Tok::EqEq || k == Tok::NotEq || k == Tok::Lt || k == Tok::Le || k == Tok::Gt ||
         k == Tok::Ge;
}

ExprParser::Value ExprParser::cmpExpr() {
  Value first = addExpr();
  if (!isCmp(peek().kind))
    return first;
  Expr prev = wantInt(first);
  Expr all = Expr::boolConst(true);
  while (isCmp(peek().kind)) {
    Tok op = next().kind;
    Expr rhs = wantInt(addExpr());
    Expr c;
    switch (op) {
    case Tok::EqEq: c = prev == rhs; break;
    case Tok::NotEq: c = prev != rhs; break;
    case Tok::Lt: c = prev < rhs; break;
    case Tok::Le: c = prev <= rhs; break;
    case Tok::Gt: c = prev > rhs; break;
    default: c = prev >= rhs; break;
    }
    all = all && c;
    prev = rhs;
  }
  return {all, true, first.offset};
}

ExprParser::Value ExprParser::addExpr() {
  Value lhs = mulExpr();
  while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
    Tok op = next().kind;
    Expr a = wantInt(lhs);
    Expr b = wantInt(mulExpr());
    lhs.expr = op == Tok::Plus ? a + b : a - b;
  }
  return lhs;
}

ExprParser::Value ExprParser::mulExpr() {
  Value lhs = unary();
  for (;;) {
    Tok k = peek().kind;
    if (k == Tok::Slash)
      unexpected(peek());
    if (k != Tok::Star && k != Tok::SlashSlash && k != Tok::Percent)
      break;
    Token op = next();
    Expr a = wantInt(lhs);
    Expr b = wantInt(unary());
    if (k == Tok::Star)
      lhs.expr = a * b;
    else if (k == Tok::SlashSlash)
      lhs.expr = checked(smt::floorDiv(a, b), op);
    else
      lhs.expr = checked(smt::mod(a, b), op);
  }
  return lhs;
}

ExprParser::Value ExprParser::unary() {
  if (peek().kind == Tok::Minus || peek().kind == Tok::Plus) {
    Nest nest(*this, peek());
    Token op = next();
    Value v = unary();
    Expr e = wantInt(v);
    return {op.kind == Tok::Minus ? -e : e, false, op.offset};
  }
  return primary();
}

ExprParser::Value ExprParser::primary() {
  Token t = peek();
  switch (t.kind) {
  case Tok::Int:
    next();
    return {Expr::intConst(t.value), false, t.offset};
  case Tok::LParen: {
    Nest nest(*this, t);
    next();
    Value v = orExpr();
    expect(Tok::RParen, "')'");
    v.offset = t.offset;
    return v;
  }
  case Tok::Ident: {
    if (isKeyword(t.text))
      unexpected(t);
    next();
    if (peek().kind == Tok::LParen)
      return call(t);
    if (auto e = syms_.lookup(t.text))
      return {*e, false, t.offset};
    fail("unknown symbol '" + t.text + "' at column " + column(t) +
             didYouMean(t.text, syms_.names),
         locOf(t));
  }
  default:
    unexpected(t);
  }
}

ExprParser::Value ExprParser::call(const Token &fn) {
  Nest nest(*this, fn);
  static const std::vector<std::string> fns = {"ceildiv", "min", "max"};
  if (fn.text != "ceildiv" && fn.text != "min" && fn.text != "max") {
    std::string hint = didYouMean(fn.text, fns);
    fail("unknown function '" + fn.text + "' at column " + column(fn) +
             (hint.empty() ? "; expected ceildiv, min or max" : hint),
         locOf(fn));
  }
  expect(Tok::LParen, "'('");
  std::vector<Expr> args;
  if (peek().kind != Tok::RParen) {
    do
      args.push_back(wantInt(orExpr()));
    while (accept(Tok::Comma));
  }
  expect(Tok::RParen, "')' or ','");
  bool isCeil = fn.text == "ceildiv";
  // min/max fold over any number of arguments; ceildiv is strictly binary.
  if (isCeil ? args.size() != 2 : args.size() < 2)
    fail(fn.text + "() at column " + column(fn) + " takes " +
             (isCeil ? "exactly" : "at least") + " 2 arguments, got " +
             std::to_string(args.size()),
         locOf(fn));
  if (isCeil)
    return {checked(smt::ceilDiv(args[0], args[1]), fn), false, fn.offset};
  Expr acc = args[0];
  for (size_t i = 1; i < args.size(); ++i)
    acc = fn.text == "min" ? smt::min(acc, args[i]) : smt::max(acc, args[i]);
  return {acc, false, fn.offset};
}

// --- Entry points -------------------------------------------------------------

Expr parseIntExprOrThrow(const std::string &text, const SymbolTable &syms, const SrcLoc &loc) {
  return ExprParser(text, syms, loc).parseAll(false);
}

Expr parseConstraintOrThrow(const std::string &text, const SymbolTable &syms,
                            const SrcLoc &loc) {
  return ExprParser(text, syms, loc).parseAll(true);
}

} // namespace shardproof::spec::detail

namespace shardproof::spec {

llvm::Expected<smt::Expr> parseIntExpr(const std::string &text, const SymbolTable &syms,
                                       const SrcLoc &loc) {
  return detail::guarded<smt::Expr>([&] { return detail::parseIntExprOrThrow(text, syms, loc); });
}

llvm::Expected<smt::Expr> parseConstraint(const std::string &text, const SymbolTable &syms,
                                          const SrcLoc &loc) {
  return detail::guarded<smt::Expr>(
      [&] { return detail::parseConstraintOrThrow(text, syms, loc); });
}

} // namespace shardproof::spec
