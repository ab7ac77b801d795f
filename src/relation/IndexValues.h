// Internal: integer tensors read back as integer expressions (IndexValue.cpp):
// token ids, a vocab shard's range check, positions, masks. A component of
// the check with its own state (what is proven >= 0, the recognised constant
// masks), reading only the class table.
#pragma once

#include "Classes.h"

#include "shardproof/ir/ConstantMask.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardproof::relation {

class IndexValues {
public:
  explicit IndexValues(const ClassTable &classes) : classes(classes) {}

  /// The element term `t` of an integer tensor (over classes of `table`) as an
  /// integer expression; nullopt if it is not integer data we can follow.
  std::optional<smt::Expr> indexValue(const ClassTable &table, const ir::Term &t, int depth = 0) const;
  std::optional<smt::Expr> constantCondition(const ClassTable &table, const ir::Term &t) const;
  static std::optional<smt::Expr> arithmeticProgression(const ClassInfo &ci, const ir::Term &t);
  /// Name of the uninterpreted function giving a leaf integer input's elements.
  std::string valueFunction(ClassId c) const;
  bool knownNonNegative(const smt::Expr &e) const;
  /// Integer values proven >= 0 at every admissible size (where their count
  /// terms were built).
  std::vector<smt::Expr> provenNonNegative;

private:
  const ClassTable &classes;
  /// The index condition each constant class's content equals, or nullopt
  /// (ConstantMask.h); a function of the content alone, so a cache.
  mutable std::unordered_map<ClassId, std::optional<ir::ConstantCondition>> constantConditions;
};

} // namespace shardproof::relation
