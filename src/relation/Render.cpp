// Rendering relation terms in the spec's relation language where possible:
// `x`, `concat(h@0, h@1, axis=2)`, `sum(p@0, p@1)`; the raw term otherwise.
#include "Render.h"

#include <algorithm>
#include <functional>

namespace shardproof::relation {

using smt::Expr;
using namespace ir;

using Namer = std::function<std::string(ClassId)>;

// Is `idx` the identity index, except on `axis` where it may be shifted?
static bool identityExcept(const IndexVec &idx, int axis, Expr *shift) {
  for (size_t d = 0; d < idx.size(); ++d) {
    Expr v = indexVar("i", static_cast<unsigned>(d));
    if (static_cast<int>(d) == axis) {
      auto aff = idx[d].affineIn("i!" + std::to_string(d));
      if (!aff || aff->first != 1)
        return false;
      if (shift)
        *shift = aff->second;
      continue;
    }
    if (!idx[d].same(v))
      return false;
  }
  return true;
}

// A concat along `axis` of known length, read off position by position: the
// Select chain picks one part at each position p, and part j must cover a run
// [o_j, o_j + n_j) reading its own index p - o_j there, and the identity on the
// other dims. This also reads a part of size 1 indexed by the constant 0 (one
// head per rank), which has no shift.
// The identity index on every dim but `axis` (which may be anything).
static bool identityExceptAxisFree(const IndexVec &idx, int axis) {
  for (size_t d = 0; d < idx.size(); ++d)
    if (static_cast<int>(d) != axis && !idx[d].same(indexVar("i", static_cast<unsigned>(d))))
      return false;
  return true;
}

// The one index axis every condition of a select tree tests (nullopt if not one).
static std::optional<int> selectAxis(const Term &t) {
  std::optional<int> axis;
  std::function<bool(const Term &)> walk = [&](const Term &x) {
    if (x->kind != TermKind::Select)
      return true;
    int a = -1;
    for (auto &v : x->cond.vars()) {
      if (v.rfind("i!", 0) != 0)
        return false;
      int d = std::stoi(v.substr(2));
      if (a >= 0 && d != a)
        return false;
      a = d;
    }
    if (a < 0 || (axis && *axis != a))
      return false;
    axis = a;
    return walk(x->args[0]) && walk(x->args[1]);
  };
  if (!walk(t))
    return std::nullopt;
  return axis;
}

static void treeLeaves(const Term &t, std::vector<Term> &out) {
  if (t->kind == TermKind::Select) {
    treeLeaves(t->args[0], out);
    treeLeaves(t->args[1], out);
    return;
  }
  out.push_back(t);
}

static std::optional<std::string> concatByPositions(const ClassTable &classes, const Namer &name, const Term &t, int axis) {
  std::vector<Term> parts;
  treeLeaves(t, parts); // in the order the walk below numbers them
  int64_t total = 0;
  for (auto &p : parts) {
    if (p->kind != TermKind::Read || static_cast<size_t>(axis) >= p->idx.size())
      return std::nullopt;
    auto n = classes[p->cls].shape.dims[axis].simplify().asInt();
    if (!n || *n <= 0)
      return std::nullopt;
    total += *n;
  }
  // Each position costs a few expression evaluations; long axes (a hidden
  // dimension) are shard concatenations the shifted-read form below reads off.
  if (total > 512)
    return std::nullopt;
  std::string var = "i!" + std::to_string(axis);
  std::vector<int64_t> start(parts.size(), -1), seen(parts.size(), 0);
  int64_t expectNext = 0;
  std::vector<size_t> order;
  for (int64_t pos = 0; pos < total; ++pos) {
    auto env = [&](const std::string &n) -> std::optional<int64_t> {
      return n == var ? std::optional<int64_t>(pos) : std::nullopt;
    };
    // Walk the select tree (a chain, or nested selects on the same axis) to
    // the leaf this position reads; j numbers leaves left to right.
    Term cur = t;
    size_t j = 0;
    while (cur->kind == TermKind::Select) {
      auto c = cur->cond.eval(env);
      if (!c)
        return std::nullopt;
      if (*c) {
        cur = cur->args[0];
      } else {
        std::vector<Term> skipped;
        treeLeaves(cur->args[0], skipped);
        j += skipped.size();
        cur = cur->args[1];
      }
    }
    if (start[j] < 0) {
      if (pos != expectNext)
        return std::nullopt;
      start[j] = pos;
      order.push_back(j);
    }
    if (pos != start[j] + seen[j])
      return std::nullopt; // not one contiguous run
    auto at = parts[j]->idx[axis].eval(env);
    if (!at || *at != pos - start[j])
      return std::nullopt;
    // The other dims read the identity at this position (a flattened index
    // like 2*i!1 + i!3 is i!3 where the head i!1 is 0).
    IndexVec other = parts[j]->idx;
    for (size_t d = 0; d < other.size(); ++d)
      if (static_cast<int>(d) != axis)
        other[d] = other[d].substitute({Expr::intVar(var)}, {Expr::intConst(pos)}).simplify();
    if (!identityExceptAxisFree(other, axis))
      return std::nullopt;
    ++seen[j];
    expectNext = pos + 1;
  }
  std::string s = "concat(";
  for (size_t k = 0; k < order.size(); ++k) {
    size_t j = order[k];
    if (seen[j] != *classes[parts[j]->cls].shape.dims[axis].simplify().asInt())
      return std::nullopt;
    s += (k ? ", " : "") + name(parts[j]->cls);
  }
  if (order.size() != parts.size())
    return std::nullopt;
  return s + ", axis=" + std::to_string(axis) + ")";
}

static std::optional<std::string> renderRel(const ClassTable &classes, const Namer &name, const Term &t) {
  switch (t->kind) {
  case TermKind::Read:
    if (identityExcept(t->idx, -1, nullptr))
      return name(t->cls);
    for (size_t a = 0; a < t->idx.size(); ++a) {
      Expr shift;
      if (identityExcept(t->idx, static_cast<int>(a), &shift) && shift.isValid()) {
        if (auto s = shift.asInt(); s && *s < 0)
          break;
        return "slice(" + name(t->cls) + ", axis=" + std::to_string(a) + ", start=" + shift.str() + ")";
      }
    }
    return std::nullopt;
  case TermKind::Apply: {
    if (t->fn != Fn::Add)
      return std::nullopt;
    std::string s = "sum(";
    for (size_t i = 0; i < t->args.size(); ++i) {
      auto r = renderRel(classes, name, t->args[i]);
      if (!r)
        return std::nullopt;
      s += (i ? ", " : "") + *r;
    }
    return s + ")";
  }
  case TermKind::Select: {
    // A select tree whose conditions all test one index axis: read it off
    // position by position when the axis has a known length.
    if (auto a = selectAxis(t))
      if (auto c = concatByPositions(classes, name, t, *a))
        return c;
    // concat: a chain Select(i_a < m, X0, Select(i_a < m2, X1, ...)) of reads
    // shifted along one axis.
    std::vector<Term> parts;
    Term cur = t;
    int axis = -1;
    while (cur->kind == TermKind::Select) {
      Expr cond = cur->cond.asNot().value_or(cur->cond);
      if (!cond.asCmp())
        return std::nullopt;
      auto vars = cur->cond.vars();
      int a = -1;
      for (auto &v : vars)
        if (v.rfind("i!", 0) == 0)
          a = std::stoi(v.substr(2));
      if (a < 0 || (axis >= 0 && a != axis))
        return std::nullopt;
      axis = a;
      parts.push_back(cur->args[0]);
      cur = cur->args[1];
    }
    parts.push_back(cur);

    // Order the parts by where they sit on the axis (the Select chain may test
    // the last shard first), and say concat only when they tile [0, n) exactly.
    std::vector<std::pair<Expr, Term>> placed;
    for (auto &p : parts) {
      Expr shift;
      if (p->kind != TermKind::Read || !identityExcept(p->idx, axis, &shift))
        return std::nullopt;
      placed.push_back({(-shift).simplify(), p});
    }
    std::stable_sort(placed.begin(), placed.end(), [](auto &a, auto &b) {
      auto x = a.first.asInt(), y = b.first.asInt();
      return x && y && *x < *y;
    });
    Expr next = Expr::intConst(0);
    std::string s = "concat(";
    for (size_t i = 0; i < placed.size(); ++i) {
      const ClassInfo &ci = classes[placed[i].second->cls];
      if (!placed[i].first.simplify().same(next.simplify()) || static_cast<size_t>(axis) >= ci.shape.rank())
        return std::nullopt;
      next = next + ci.shape.dims[axis];
      s += (i ? ", " : "") + name(placed[i].second->cls);
    }
    return s + ", axis=" + std::to_string(axis) + ")";
  }
  default:
    return std::nullopt;
  }
}

static std::string renderWith(const ClassTable &classes, const Namer &name, const Term &t) {
  if (auto r = renderRel(classes, name, t))
    return *r;
  return ir::str(t, name);
}

// Placeholders for class names in a memoized rendering: \x01 <local number> \x02.
static std::string fill(const std::string &tmpl, const std::vector<ClassId> &classes, const ClassTable &table) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '\x01') {
      out += tmpl[i];
      continue;
    }
    size_t end = tmpl.find('\x02', i);
    out += table.label(classes[std::stoul(tmpl.substr(i + 1, end - i - 1))]);
    i = end;
  }
  return out;
}

// Renderings are memoized like covers: the same relation one layer up differs
// only in class names, and reading a concat off position by position is slow.
std::string renderTerm(const ClassTable &classes, NodeMemo &memo, bool useMemo, const Term &t) {
  Namer label = [&](ClassId c) { return classes.label(c); };
  if (!useMemo)
    return renderWith(classes, label, t);
  MemoKey key(&classes);
  key.str("render");
  key.term(t);
  if (auto hit = memo.lookup(key, classes))
    return fill(hit->first->text, key.classes(), classes);
  std::string text;
  {
    ClassTable::Recording rec(classes);
    bool named = true;
    llvm::DenseMap<ClassId, unsigned> local;
    for (unsigned k = 0; k < key.classes().size(); ++k)
      local[key.classes()[k]] = k;
    Namer placeholder = [&](ClassId c) {
      auto it = local.find(c);
      if (it == local.end()) {
        named = false;
        return std::string();
      }
      return "\x01" + std::to_string(it->second) + "\x02";
    };
    text = renderWith(classes, placeholder, t);
    if (!named || !rec.reusable())
      return renderWith(classes, label, t);
    NodeMemo::Result r;
    r.text = text;
    memo.store(key, rec.consulted(), std::move(r));
  }
  return fill(text, key.classes(), classes);
}

RenderTemplate renderTemplate(const ClassTable &classes, const Term &t) {
  RenderTemplate out;
  llvm::DenseMap<ClassId, unsigned> local;
  Namer placeholder = [&](ClassId c) {
    auto [it, fresh] = local.try_emplace(c, static_cast<unsigned>(out.classes.size()));
    if (fresh)
      out.classes.push_back(c);
    return "\x01" + std::to_string(it->second) + "\x02";
  };
  out.text = renderWith(classes, placeholder, t);
  return out;
}

std::string fillTemplate(const std::string &text, const std::vector<ClassId> &classes, const ClassTable &table) {
  return fill(text, classes, table);
}

} // namespace shardproof::relation
