// Internal: relation terms in the spec's relation language (Render.cpp).
#pragma once

#include "Classes.h"
#include "NodeMemo.h"

#include <string>
#include <vector>

namespace shardproof::relation {

/// `t` as `concat(h@0, h@1, axis=2)`, `sum(p@0, p@1)`, `x` where it reads as
/// one, else the raw term; memoized in `memo` (layers equal up to names) when
/// `useMemo`.
std::string renderTerm(const ClassTable &classes, NodeMemo &memo, bool useMemo, const ir::Term &t);

/// A rendering of a term with its classes as placeholders, and those classes
/// in order: the same text filled with other classes (a layer copy's renamed
/// ones) is the rendering of the term that reads them in their place, as the
/// memoized renderings above rely on.
struct RenderTemplate {
  std::string text;
  std::vector<ClassId> classes;
};
RenderTemplate renderTemplate(const ClassTable &classes, const ir::Term &t);
/// `t`'s text with its placeholders naming `classes` (as many as t.classes).
std::string fillTemplate(const std::string &text, const std::vector<ClassId> &classes, const ClassTable &table);

} // namespace shardproof::relation
