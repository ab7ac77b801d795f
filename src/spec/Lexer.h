// Private to src/spec: tokens of the integer / constraint / relation expression
// languages. One lexer serves all three so that columns are reported alike.
#pragma once

#include "Internal.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardproof::spec::detail {

enum class Tok {
  End,
  Int,     // 42
  Ident,   // seq, hidden.size, ceildiv, and
  Str,     // 'a name' or "a name" (tensor names in relations)
  Plus, Minus, Star, SlashSlash, Slash, Percent,
  LParen, RParen, LBracket, RBracket, Comma, Assign, At,
  EqEq, NotEq, Lt, Le, Gt, Ge, AndAnd, OrOr, Bang,
};

struct Token {
  Tok kind = Tok::End;
  std::string text; // source spelling (for Str: the unquoted contents)
  int64_t value = 0; // Tok::Int
  size_t offset = 0; // byte offset in the expression text
};

/// Splits `text` into tokens, ending with Tok::End. Throws ParseFailure.
std::vector<Token> lex(const std::string &text, const SrcLoc &base);

/// How a token is named in messages: "')'", "identifier 'x'", "end of expression".
std::string describe(const Token &t);

bool isIdentStart(char c);
bool isIdentChar(char c);
/// True if `s` lexes as exactly one identifier.
bool isIdentifier(const std::string &s);
/// A tensor name as written in an expression so that it lexes back as that
/// name: plain when an identifier, else quoted with the quote it lacks.
std::string tensorRef(const std::string &name);

} // namespace shardproof::spec::detail
