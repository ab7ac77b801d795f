#include "Classes.h"

#include <algorithm>
#include <functional>

namespace shardproof::relation {

// Registers every leaf of the Select tree of a definition as a matchable piece:
// a masked tensor (causal mask, padding) is matched region by region.
static void addPieces(std::unordered_map<size_t, std::vector<ClassTable::Piece>> &index, ClassId id,
                      const Term &t, const smt::Expr &cond) {
  if (t->kind == ir::TermKind::Select) {
    addPieces(index, id, t->args[0], (cond && t->cond).simplify());
    addPieces(index, id, t->args[1], (cond && !t->cond).simplify());
    return;
  }
  index[t->skeleton].push_back({id, cond, t});
}

ClassId ClassTable::add(ClassInfo info) {
  // A class made inside a recorded computation is known to it by construction,
  // not through a recorded access: its result cannot be replayed by renaming.
  poisonRecording();
  ClassId id = static_cast<ClassId>(classes_.size());
  if (info.kind == ClassInfo::Compute && info.def) {
    addPieces(bySkeleton_, id, info.def, smt::Expr::boolConst(true));
    // The whole Select as well: a reference term with the same mask is one read.
    if (info.def->kind == ir::TermKind::Select)
      bySkeleton_[info.def->skeleton].push_back({id, smt::Expr::boolConst(true), info.def});
  }
  classes_.push_back(std::move(info));
  return id;
}

ClassId ClassTable::intern(ClassInfo info, bool &created) {
  if (auto c = find(info.def, info.shape)) {
    created = false;
    return *c;
  }
  size_t h = info.def->hash;
  created = true;
  ClassId id = add(std::move(info));
  byHash_[h].push_back(id);
  return id;
}

std::optional<ClassId> ClassTable::find(const Term &def, const ir::Shape &shape) const {
  auto it = byHash_.find(def->hash);
  if (it == byHash_.end())
    return std::nullopt;
  for (ClassId c : it->second)
    if (ir::sameTerm(classes_[c].def, def) && classes_[c].shape.same(shape))
      return c;
  return std::nullopt;
}

std::vector<ClassId> ClassTable::Recording::consulted() const {
  std::vector<ClassId> out(t_.log_.begin() + static_cast<std::ptrdiff_t>(start_), t_.log_.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const std::vector<ClassTable::Piece> &ClassTable::withSkeleton(size_t skeleton) const {
  auto it = bySkeleton_.find(skeleton);
  return it == bySkeleton_.end() ? none_ : it->second;
}

ClassId ClassTable::constant(const std::string &label, const std::vector<int64_t> &dims,
                             const std::vector<double> &data) {
  size_t h = std::hash<size_t>()(dims.size());
  for (auto d : dims)
    h = h * 31 + std::hash<int64_t>()(d);
  for (auto v : data)
    h = h * 131 + std::hash<double>()(v);
  for (ClassId c : byContent_[h])
    if (classes_[c].dataDims == dims && classes_[c].data == data)
      return c;
  ClassInfo info;
  info.kind = ClassInfo::Constant;
  info.label = label;
  for (auto d : dims)
    info.shape.dims.push_back(smt::Expr::intConst(d));
  info.data = data;
  info.dataDims = dims;
  ClassId id = add(std::move(info));
  byContent_[h].push_back(id);
  return id;
}

} // namespace shardproof::relation
