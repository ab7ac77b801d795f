// Internal: what a node's evaluation and a term's cover depend on, as memo
// keys (MemoKeys.cpp): equal keys, equal results up to class names.
#pragma once

#include "NodeMemo.h"
#include "Values.h"

#include <vector>

namespace shardproof::relation {

// `classes`: the table the terms read (MemoKey's `facts`).
MemoKey nodeKey(const ir::Node &n, const std::vector<ValueInfo> &values, const ir::OpInputs &in,
                const ClassTable &classes);
/// `maxTermNodes`: the cover's limit is part of what its result depends on.
MemoKey coverKey(const Term &t, const ir::Shape &shape, unsigned maxTermNodes, const ClassTable &classes);
/// A collective call: its node's op and attributes, and every rank's input
/// term and shape (the outputs' terms depend on nothing else).
MemoKey collectiveKey(const ir::Node &n0, const std::vector<ir::Shape> &shapes, const std::vector<Term> &ins,
                      const ClassTable &classes);
/// A same-name proposal: the reference term and, per candidate placement, the
/// ranks' terms it must equal (empty: the candidate has no sides).
MemoKey proposalKey(const Term &t, const ir::Shape &shape, const std::vector<std::vector<Term>> &candidates,
                    const ClassTable &classes);
/// An output's agreement with one rank's side of its claim: the reference
/// term and the side (each layer's weight gradients agree by the same
/// unfoldings of renamed classes).
MemoKey agreementKey(const Term &ref, const Term &side, const ir::Shape &shape, const ClassTable &classes);

} // namespace shardproof::relation
