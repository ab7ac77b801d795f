// Relation expressions: how a reference tensor is built from rank tensors.
//
//   rel  := NAME '@' (INT | '*') | FN '(' arg (',' arg)* ')'
//   arg  := KEY '=' (int | '[' int (',' int)* ']') | rel
//   NAME := identifier | 'quoted name'
//
// `NAME@*` expands in place into one tensor per rank, so `concat(h@*, axis=1)`
// with world_size 3 is `concat(h@0, h@1, h@2, axis=1)`.
#include "ExprParser.h"

#include <algorithm>

namespace shardproof::spec {
namespace detail {
namespace {

struct FnSig {
  const char *name;
  bool singleArg;                   // exactly one tensor argument (else one or more)
  std::vector<std::string> kwargs;  // all required, in canonical order
  std::vector<std::string> lists;   // which of them are lists
  std::vector<std::string> consts;  // which must be integer constants (axes, permutations)
};

const std::vector<FnSig> &signatures() {
  static const std::vector<FnSig> sigs = {
      {"concat", false, {"axis"}, {}, {"axis"}},
      {"sum", false, {}, {}, {}},
      {"mean", false, {}, {}, {}},
      {"slice", true, {"axis", "start", "end"}, {}, {"axis"}},
      {"pad", true, {"axis", "before", "after"}, {}, {"axis"}},
      {"transpose", true, {"perm"}, {"perm"}, {"perm"}},
      {"reshape", true, {"shape"}, {"shape"}, {}},
  };
  return sigs;
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class RelationParser {
public:
  RelationParser(const std::string &text, int worldSize, const SymbolTable &syms,
                 const SrcLoc &loc)
      : p_(text, syms, loc), worldSize_(worldSize) {}

  RelExpr parseTop() {
    if (p_.peek().kind == Tok::End)
      fail("empty relation expression", p_.locOf(p_.peek()));
    std::vector<RelExpr> items;
    Token first = p_.peek();
    bool star = parseInto(items);
    p_.expectEnd();
    if (star && items.size() != 1)
      fail("'" + first.text + "@*' at column " + p_.column(first) + " stands for " +
               std::to_string(items.size()) +
               " tensors; use it inside a call such as concat(" + first.text +
               "@*, axis=0) or sum(" + first.text + "@*)",
           p_.locOf(first));
    return std::move(items.front());
  }

private:
  // Parses one relation and appends it (or, for NAME@*, its expansion) to `out`.
  // Returns true if it was a NAME@* expansion.
  bool parseInto(std::vector<RelExpr> &out) {
    Token name = p_.next();
    if (name.kind != Tok::Ident && name.kind != Tok::Str) {
      if (name.kind == Tok::End || name.kind == Tok::RParen)
        fail("expected a relation (NAME@RANK or a call) at column " + p_.column(name) +
                 ", found " + describe(name),
             p_.locOf(name));
      p_.unexpected(name);
    }
    if (name.kind == Tok::Ident && p_.peek().kind == Tok::LParen) {
      out.push_back(parseCall(name));
      return false;
    }
    if (p_.peek().kind != Tok::At)
      fail("expected '@' after '" + name.text + "' at column " + p_.column(p_.peek()) +
               " (a rank tensor is written NAME@RANK or NAME@*)",
           p_.locOf(p_.peek()));
    p_.next();
    Token r = p_.next();
    RelExpr t;
    t.kind = RelExpr::Kind::Tensor;
    t.name = name.text;
    t.loc = p_.locOf(name);
    if (r.kind == Tok::Star) {
      for (int i = 0; i < worldSize_; ++i) {
        t.rank = i;
        out.push_back(t);
      }
      return true;
    }
    if (r.kind != Tok::Int)
      fail("expected a rank number or '*' after '@' at column " + p_.column(r) + ", found " +
               describe(r),
           p_.locOf(r));
    if (r.value >= worldSize_)
      fail("rank " + r.text + " out of range for world_size " + std::to_string(worldSize_),
           p_.locOf(r));
    t.rank = static_cast<int>(r.value);
    out.push_back(std::move(t));
    return false;
  }

  RelExpr parseCall(const Token &fn) {
    ExprParser::Nest nest(p_, fn);
    const FnSig *sig = nullptr;
    std::vector<std::string> names;
    for (auto &s : signatures()) {
      names.push_back(s.name);
      if (fn.text == s.name)
        sig = &s;
    }
    if (!sig)
      fail("unknown relation function '" + fn.text + "' at column " + p_.column(fn) +
               didYouMean(fn.text, names),
           p_.locOf(fn));
    RelExpr call;
    call.kind = RelExpr::Kind::Call;
    call.fn = fn.text;
    call.loc = p_.locOf(fn);
    p_.expect(Tok::LParen, "'('");
    if (p_.peek().kind != Tok::RParen) {
      do {
        if (p_.peek().kind == Tok::Ident && p_.peek(1).kind == Tok::Assign)
          call.kwargs.push_back(parseKwArg(*sig, call));
        else
          parseInto(call.args);
      } while (p_.accept(Tok::Comma));
    }
    p_.expect(Tok::RParen, "')' or ','");
    validate(*sig, call);
    return call;
  }

  RelExpr::KwArg parseKwArg(const FnSig &sig, const RelExpr &call) {
    Token key = p_.next();
    p_.next(); // '='
    if (!contains(sig.kwargs, key.text)) {
      std::string allowed;
      for (auto &k : sig.kwargs)
        allowed += (allowed.empty() ? "" : ", ") + k;
      fail("unknown keyword argument '" + key.text + "' for " + call.fn + "() at column " +
               p_.column(key) + didYouMean(key.text, sig.kwargs) +
               (allowed.empty() ? " (it takes none)" : " (allowed: " + allowed + ")"),
           p_.locOf(key));
    }
    if (call.kwarg(key.text))
      fail("keyword argument '" + key.text + "' given twice at column " + p_.column(key),
           p_.locOf(key));
    RelExpr::KwArg kw;
    kw.key = key.text;
    kw.loc = p_.locOf(key);
    bool wantList = contains(sig.lists, key.text);
    bool wantConst = contains(sig.consts, key.text);
    if (p_.peek().kind == Tok::LBracket) {
      if (!wantList)
        fail("'" + key.text + "' at column " + p_.column(key) +
                 " takes a single integer expression, not a list",
             p_.locOf(key));
      p_.next();
      kw.isList = true;
      if (p_.peek().kind != Tok::RBracket) {
        do
          kw.values.push_back(value(key, wantConst));
        while (p_.accept(Tok::Comma));
      }
      p_.expect(Tok::RBracket, "']' or ','");
    } else {
      if (wantList)
        fail("'" + key.text + "' at column " + p_.column(key) + " takes a list such as " +
                 (key.text == "perm" ? "[1, 0]" : "[a, b]"),
             p_.locOf(key));
      kw.values.push_back(value(key, wantConst));
    }
    return kw;
  }

  smt::Expr value(const Token &key, bool wantConst) {
    Token at = p_.peek();
    smt::Expr e = p_.parseInt();
    // Axes and permutations pick dimensions, so they must be known numbers.
    if (wantConst && !e.asInt())
      fail("'" + key.text + "' at column " + p_.column(at) +
               " must be an integer constant, got '" + e.str() + "'",
           p_.locOf(at));
    return e;
  }

  void validate(const FnSig &sig, RelExpr &call) {
    for (auto &k : sig.kwargs)
      if (!call.kwarg(k))
        fail(call.fn + "() needs keyword argument '" + k + "'", call.loc);
    if (call.args.empty())
      fail(call.fn + "() needs at least one tensor argument", call.loc);
    if (sig.singleArg && call.args.size() != 1)
      fail(call.fn + "() takes exactly one tensor argument, got " +
               std::to_string(call.args.size()),
           call.loc);
    // Canonical order makes str() independent of how the user ordered kwargs.
    std::stable_sort(call.kwargs.begin(), call.kwargs.end(), [&](auto &a, auto &b) {
      auto pos = [&](const std::string &k) {
        return std::find(sig.kwargs.begin(), sig.kwargs.end(), k) - sig.kwargs.begin();
      };
      return pos(a.key) < pos(b.key);
    });
  }

  ExprParser p_;
  int worldSize_;
};

} // namespace

RelExpr parseRelationOrThrow(const std::string &text, int worldSize, const SymbolTable &syms,
                             const SrcLoc &loc) {
  if (worldSize < 1)
    fail("world_size must be at least 1 to parse a relation, got " + std::to_string(worldSize),
         loc);
  return RelationParser(text, worldSize, syms, loc).parseTop();
}

} // namespace detail

llvm::Expected<RelExpr> parseRelation(const std::string &text, int worldSize,
                                      const SymbolTable &syms, const SrcLoc &loc) {
  return detail::guarded<RelExpr>(
      [&] { return detail::parseRelationOrThrow(text, worldSize, syms, loc); });
}

std::string RelExpr::str() const {
  if (kind == Kind::Tensor) {
    return detail::tensorRef(name) + "@" + std::to_string(rank);
  }
  std::string s = fn + "(";
  bool first = true;
  auto sep = [&] {
    if (!first)
      s += ", ";
    first = false;
  };
  for (auto &a : args) {
    sep();
    s += a.str();
  }
  for (auto &k : kwargs) {
    sep();
    s += k.key + "=";
    if (k.isList)
      s += "[";
    for (size_t i = 0; i < k.values.size(); ++i)
      s += (i ? ", " : "") + k.values[i].str();
    if (k.isList)
      s += "]";
  }
  return s + ")";
}

} // namespace shardproof::spec
