#include "Lexer.h"

#include <cctype>
#include <limits>

namespace shardproof::spec::detail {

SrcLoc offsetLoc(const SrcLoc &base, size_t offset) {
  SrcLoc l = base;
  // Without a known start column the offset is still the best column we have.
  l.col = (base.col > 0 ? base.col : 1) + static_cast<int>(offset);
  return l;
}

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool isIdentifier(const std::string &s) {
  if (s.empty() || !isIdentStart(s[0]))
    return false;
  for (char c : s)
    if (!isIdentChar(c))
      return false;
  return true;
}

std::string tensorRef(const std::string &name) {
  if (isIdentifier(name))
    return name;
  // A name with both quotes cannot be written (strings have no escapes), so it
  // never came from a parsed expression.
  char q = name.find('\'') == std::string::npos ? '\'' : '"';
  return q + name + q;
}

std::string describe(const Token &t) {
  switch (t.kind) {
  case Tok::End: return "end of expression";
  case Tok::Int: return "number " + t.text;
  case Tok::Ident: return "identifier '" + t.text + "'";
  case Tok::Str: return "string '" + t.text + "'";
  default: return "token '" + t.text + "'";
  }
}

std::vector<Token> lex(const std::string &text, const SrcLoc &base) {
  std::vector<Token> out;
  size_t i = 0, n = text.size();
  auto column = [](size_t off) { return std::to_string(off + 1); };
  while (i < n) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.offset = i;
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      int64_t v = 0;
      bool overflow = false;
      while (j < n && std::isdigit(static_cast<unsigned char>(text[j]))) {
        int d = text[j] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - d) / 10)
          overflow = true;
        else
          v = v * 10 + d;
        ++j;
      }
      // "3x" is almost certainly a missing operator, not two tokens.
      if (j < n && isIdentStart(text[j]))
        fail("malformed number '" + text.substr(i, j + 1 - i) + "' at column " + column(i) +
                 " (missing '*'?)",
             offsetLoc(base, i));
      if (overflow)
        fail("integer literal '" + text.substr(i, j - i) + "' at column " + column(i) +
                 " is too large",
             offsetLoc(base, i));
      t.kind = Tok::Int;
      t.value = v;
      t.text = text.substr(i, j - i);
      i = j;
    } else if (isIdentStart(c)) {
      size_t j = i;
      while (j < n && isIdentChar(text[j]))
        ++j;
      t.kind = Tok::Ident;
      t.text = text.substr(i, j - i);
      i = j;
    } else if (c == '\'' || c == '"') {
      size_t j = text.find(c, i + 1);
      if (j == std::string::npos)
        fail("unterminated string starting at column " + column(i), offsetLoc(base, i));
      t.kind = Tok::Str;
      t.text = text.substr(i + 1, j - i - 1);
      i = j + 1;
    } else {
      auto two = i + 1 < n ? text.substr(i, 2) : std::string();
      struct Op { const char *s; Tok k; };
      static const Op ops2[] = {{"//", Tok::SlashSlash}, {"==", Tok::EqEq}, {"!=", Tok::NotEq},
                                {"<=", Tok::Le},         {">=", Tok::Ge},   {"&&", Tok::AndAnd},
                                {"||", Tok::OrOr}};
      static const Op ops1[] = {{"+", Tok::Plus},     {"-", Tok::Minus},    {"*", Tok::Star},
                                {"/", Tok::Slash},    {"%", Tok::Percent},  {"(", Tok::LParen},
                                {")", Tok::RParen},   {"[", Tok::LBracket}, {"]", Tok::RBracket},
                                {",", Tok::Comma},    {"=", Tok::Assign},   {"@", Tok::At},
                                {"<", Tok::Lt},       {">", Tok::Gt},       {"!", Tok::Bang}};
      bool found = false;
      for (auto &op : ops2)
        if (two == op.s) {
          t.kind = op.k;
          t.text = op.s;
          i += 2;
          found = true;
          break;
        }
      if (!found)
        for (auto &op : ops1)
          if (c == op.s[0]) {
            t.kind = op.k;
            t.text = op.s;
            i += 1;
            found = true;
            break;
          }
      if (!found)
        fail(std::string("unexpected character '") + c + "' at column " + column(i),
             offsetLoc(base, i));
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::End;
  end.offset = n;
  out.push_back(end);
  return out;
}

} // namespace shardproof::spec::detail
