// Internal: relation terms in the spec's relation language (Render.cpp).
#pragma once

#include "Classes.h"
#include "NodeMemo.h"

#include <string>

namespace shardproof::relation {

/// `t` as `concat(h@0, h@1, axis=2)`, `sum(p@0, p@1)`, `x` where it reads as
/// one, else the raw term; memoized in `memo` (layers equal up to names) when
/// `useMemo`.
std::string renderTerm(const ClassTable &classes, NodeMemo &memo, bool useMemo, const ir::Term &t);

} // namespace shardproof::relation
