"""Mutation operators. Each `op_*` function takes a Fixture and yields Mutants:
a stable id (fixture:operator:location), a description, and an `apply(ctx)`
that edits the mutant's copy of the rank graphs (ctx.model(r)) or of the spec
(ctx.spec, ctx.ranks). Only nodes that reach a graph output are mutated: an
edit of dead code is harmless by construction, so it is never generated."""

import numpy as np
from onnx import helper, numpy_helper

import graphs as G

WHERE_CMP = ("Sub", "Add", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal")


class Mutant:
    def __init__(self, fixture, op, loc, what, apply):
        self.fixture = fixture.name
        self.op = op
        self.loc = loc
        self.what = what
        self.apply = apply

    @property
    def id(self):
        return "%s:%s:%s" % (self.fixture, self.op, self.loc)


def live_nodes_of(fx, r, types):
    g = fx.models[r].graph
    live = G.live_nodes(g)
    return [(i, n) for i, n in enumerate(g.node) if i in live and n.op_type in types]


def at(ctx, r, i):
    """Node i of the mutant's copy of rank r (node lists are only edited by the
    mutant itself, so the index is that of the original graph)."""
    return ctx.model(r).graph.node[i]


# --- collectives (every rank: the k-th collective is matched across ranks) ------
def op_drop_collective(fx):
    """Skip the k-th collective: AllReduce becomes Identity, AllGather a Concat
    of P copies of the local part, ReduceScatter the local slice of the
    unreduced input (shapes stay valid, data is wrong)."""
    for k, i in enumerate(G.collectives(fx.models[0].graph)):
        node = fx.models[0].graph.node[i]

        def apply(ctx, k=k):
            for r in range(fx.P):
                g = ctx.model(r).graph
                n = g.node[G.collectives(g)[k]]
                axis = G.attr(n, "axis", 0)
                ed = ctx.editor(r)
                if n.op_type == "AllReduce":
                    ed.replace(n, "Identity", [n.input[0]])
                elif n.op_type == "AllGather":
                    ed.replace(n, "Concat", [n.input[0]] * fx.P, axis=axis)
                elif n.op_type == "ReduceScatter":
                    outs = [n.output[0] if j == r else ed.fresh("part") for j in range(fx.P)]
                    ed.replace(n, "Split", [n.input[0]], outputs=outs, axis=axis)
                else:
                    raise ValueError("cannot drop " + n.op_type)

        yield Mutant(fx, "drop_collective", "%d(%s)" % (k, G.node_label(node)),
                     "skip %s on every rank" % node.op_type, apply)


def op_collective_axis(fx):
    """AllGather / ReduceScatter along another axis (every rank)."""
    g0 = fx.models[0].graph
    for k, i in enumerate(G.collectives(g0)):
        node = g0.node[i]
        if node.op_type not in ("AllGather", "ReduceScatter"):
            continue
        axis = G.attr(node, "axis", 0)
        for new in sorted({(axis + 1) % 3, (axis + 2) % 3} - {axis}):
            def apply(ctx, k=k, new=new):
                for r in range(fx.P):
                    g = ctx.model(r).graph
                    G.set_attr(g.node[G.collectives(g)[k]], "axis", new)

            yield Mutant(fx, "collective_axis", "%d(%s):axis=%d" % (k, G.node_label(node), new),
                         "%s along axis %d instead of %d" % (node.op_type, new, axis), apply)


# --- one rank's local computation -------------------------------------------------
def op_slice_bound(fx):
    """Shift one element of a constant Slice start or end by +-1 on one rank."""
    for r in range(fx.P):
        g = fx.models[r].graph
        for i, n in live_nodes_of(fx, r, ("Slice",)):
            for slot, which in ((1, "starts"), (2, "ends")):
                v = G.const_value(g, n.input[slot]) if len(n.input) > slot else None
                if v is None:
                    continue
                for j, x in enumerate(v.reshape(-1)):
                    if abs(int(x)) >= G.SENTINEL:
                        continue
                    for d in (-1, 1):
                        def apply(ctx, r=r, i=i, slot=slot, v=v, j=j, d=d):
                            w = v.copy().reshape(-1)
                            w[j] += d
                            ctx.editor(r).const_input(at(ctx, r, i), slot, w.reshape(v.shape))

                        yield Mutant(fx, "slice_bound", "r%d:%s:%s[%d]%+d" % (r, G.node_label(n), which, j, d),
                                     "%s[%d] %d -> %d" % (which, j, x, x + d), apply)


def op_swap_operands(fx):
    """Swap the two operands of a Sub, Div or MatMul on one rank."""
    for r in range(fx.P):
        for i, n in live_nodes_of(fx, r, ("Sub", "Div", "MatMul")):
            if n.input[0] == n.input[1]:
                continue  # x - x swapped is itself

            def apply(ctx, r=r, i=i):
                n = at(ctx, r, i)
                a, b = n.input[0], n.input[1]
                n.input[0], n.input[1] = b, a

            yield Mutant(fx, "swap_operands", "r%d:%s" % (r, G.node_label(n)),
                         "%s(b, a)" % n.op_type, apply)


def op_shard_offset(fx):
    """+-1 on an integer constant compared with, added to or subtracted from data
    (vocab range checks `ids < start`, `ids - start`), or a constant Gather
    index into data, on one rank."""
    for r in range(fx.P):
        g = fx.models[r].graph
        static = G.static_values(g, fx.placed[r])
        for i, n in live_nodes_of(fx, r, WHERE_CMP + ("Gather",)):
            slots = (1,) if n.op_type == "Gather" else (0, 1)
            if all(x in static for x in n.input if x):
                continue  # size arithmetic, not a data offset
            for slot in slots:
                v = G.const_value(g, n.input[slot])
                if v is None or v.dtype.kind not in "iu" or v.size != 1:
                    continue
                for d in (-1, 1):
                    def apply(ctx, r=r, i=i, slot=slot, v=v, d=d):
                        ctx.editor(r).const_input(at(ctx, r, i), slot, v + np.asarray(d, v.dtype))

                    yield Mutant(fx, "shard_offset", "r%d:%s:in%d%+d" % (r, G.node_label(n), slot, d),
                                 "offset %d -> %d" % (int(v.reshape(-1)[0]), int(v.reshape(-1)[0]) + d), apply)


def op_scale_by_p(fx):
    """Multiply a graph output, or a collective's result, by world_size on
    every rank (a forgotten 1/P, or a sum where a copy was meant). With one
    rank that is a multiplication by 1, no mutation at all: skipped."""
    if fx.P == 1:
        return
    g0 = fx.models[0].graph
    targets = [("out", o.name) for o in g0.output]
    targets += [("coll", k) for k in range(len(G.collectives(g0)))]
    for kind, t in targets:
        def apply(ctx, kind=kind, t=t):
            for r in range(fx.P):
                ed = ctx.editor(r)
                g = ed.graph
                if kind == "out":
                    node = g.node[G.producers(g)[t]]
                    slot = list(node.output).index(t)
                    et = ed.elem_type(t)
                else:
                    node, slot, et = g.node[G.collectives(g)[t]], 0, ed.elem_type(None)
                p = ed.fresh("P")

                def make(src, dst, p=p, et=et):
                    c = helper.make_node("Constant", [], [p], name=p,
                                         value=helper.make_tensor(p, et, [], [fx.P]))
                    return [c, helper.make_node("Mul", [src, p], [dst], name=dst + "_timesP")]

                ed.wrap_output(node, slot, make)

        label = t if kind == "out" else "coll%d" % t
        yield Mutant(fx, "scale_by_P", label, "%s * %d on every rank" % (label, fx.P), apply)


def op_mask(fx):
    """Remove or invert a mask on one rank: Where with its condition negated or
    replaced by one branch; Trilu on the other triangle or diagonal."""
    for r in range(fx.P):
        g = fx.models[r].graph
        for i, n in live_nodes_of(fx, r, ("Where", "Trilu")):
            variants = []
            if n.op_type == "Where":
                def negate(ctx, r=r, i=i):
                    ed = ctx.editor(r)
                    n = at(ctx, r, i)
                    inv = ed.fresh("not")
                    where, cond = ed.index_of(n), n.input[0]
                    n.input[0] = inv
                    ed.insert(where, helper.make_node("Not", [cond], [inv], name=inv))

                def branch(slot):
                    def apply(ctx, r=r, i=i):
                        n = at(ctx, r, i)
                        ctx.editor(r).replace(n, "Identity", [n.input[slot]])
                    return apply

                variants = [("not_cond", "condition negated", negate),
                            ("true_branch", "always the true branch", branch(1)),
                            ("false_branch", "always the false branch", branch(2))]
            else:
                upper = G.attr(n, "upper", 1)

                def flip(ctx, r=r, i=i, upper=upper):
                    G.set_attr(at(ctx, r, i), "upper", 1 - upper)

                variants = [("flip_upper", "upper=%d" % (1 - upper), flip)]
                k = G.const_value(g, n.input[1]) if len(n.input) > 1 and n.input[1] else None
                if k is not None:
                    for d in (-1, 1):
                        def shift(ctx, r=r, i=i, k=k, d=d):
                            ctx.editor(r).const_input(at(ctx, r, i), 1, k + np.asarray(d, k.dtype))
                        variants.append(("k%+d" % d, "diagonal k %+d" % d, shift))
            for tag, what, apply in variants:
                yield Mutant(fx, "mask", "r%d:%s:%s" % (r, G.node_label(n), tag), what, apply)


def _perturb(v):
    if v.dtype.kind == "f":
        w = np.where(np.isfinite(v), v * 1.5 + 0.25, -1.0)
        w = np.where(w == v, v + 1.0, w)  # -0.5 is 1.5x + 0.25's fixed point: no mutant
        return w.astype(v.dtype), "x*1.5+0.25 (non-finite -> -1, -0.5 -> 0.5)"
    return v + np.asarray(1, v.dtype), "x+1"


def op_change_constant(fx):
    """Perturb a float Constant / ConstantOfShape value / unplaced initializer
    (x -> 1.5x + 0.25), or add 1 to an integer one (size arithmetic: axes,
    reshape targets, shape indices; Slice bounds and data offsets are
    slice_bound's and shard_offset's), on one rank."""
    for r in range(fx.P):
        g = fx.models[r].graph
        live = G.live_nodes(g)
        consumers = {}
        for i, n in enumerate(g.node):
            if i in live:
                for s, x in enumerate(n.input):
                    consumers.setdefault(x, []).append((n, s))

        static = G.static_values(g, fx.placed[r])

        def owned_elsewhere(name):
            """Integer constants that slice_bound or shard_offset mutate."""
            for n, s in consumers.get(name, []):
                if n.op_type == "Slice" and s in (1, 2):
                    return True
                if n.op_type in WHERE_CMP + ("Gather",) and not all(x in static for x in n.input if x):
                    return True
            return False

        for i, n in enumerate(g.node):
            if i not in live:
                continue
            if n.op_type == "Constant":
                v = G.const_value(g, n.output[0])
                if v is None or v.dtype.kind not in "fiu" or (v.dtype.kind in "iu" and owned_elsewhere(n.output[0])):
                    continue
                if v.size == 0:
                    continue  # an empty shape (a scalar's ConstantOfShape): nothing to change
                w, how = _perturb(v)

                def apply(ctx, r=r, i=i, w=w):
                    node = at(ctx, r, i)
                    G.set_attr(node, "value", numpy_helper.from_array(w, node.output[0]))
                yield Mutant(fx, "change_constant", "r%d:%s" % (r, G.node_label(n)), how, apply)
            elif n.op_type == "ConstantOfShape":
                t = G.attr(n, "value")
                if t is None:
                    continue
                w, how = _perturb(numpy_helper.to_array(t))

                def apply(ctx, r=r, i=i, w=w):
                    G.set_attr(at(ctx, r, i), "value", numpy_helper.from_array(w, "value"))
                yield Mutant(fx, "change_constant", "r%d:%s" % (r, G.node_label(n)), how, apply)
        used = set(consumers)
        for t in g.initializer:
            if t.name in fx.placed[r] or t.name not in used:
                continue
            w, how = _perturb(numpy_helper.to_array(t))

            def apply(ctx, r=r, name=t.name, w=w):
                for init in ctx.model(r).graph.initializer:
                    if init.name == name:
                        init.CopyFrom(numpy_helper.from_array(w, name))
            yield Mutant(fx, "change_constant", "r%d:init:%s" % (r, t.name), how, apply)


def op_change_attribute(fx):
    """An attribute the reference also has, changed on one rank: LayerNorm
    epsilon, the Softmax / LayerNorm / ReduceMean axis, a Transpose with its
    last two axes exchanged, a pooling or convolution window one step off."""
    edits = {
        "LayerNormalization": [("epsilon", lambda v: (v or 1e-5) * 10 + 0.5), ("axis", lambda v: (v if v is not None else -1) - 1)],
        "Softmax": [("axis", lambda v: (v if v is not None else -1) - 1)],
        "ReduceMean": [("axes", lambda v: [a - 1 for a in v] if v else None)],
        "Transpose": [("perm", lambda v: list(v[:-2]) + [v[-1], v[-2]] if v and len(v) >= 2 else None)],
    }
    # A sliding window one step off on its first spatial axis: wider, longer strides,
    # or one more row of padding before it (Conv's kernel_shape must match its weight).
    first_plus_one = lambda v: [v[0] + 1] + list(v[1:]) if v else None  # noqa: E731
    window = [("strides", first_plus_one), ("pads", first_plus_one)]
    edits["AveragePool"] = edits["MaxPool"] = [("kernel_shape", first_plus_one)] + window
    edits["Conv"] = window + [("dilations", first_plus_one)]
    for r in range(fx.P):
        for i, n in live_nodes_of(fx, r, tuple(edits)):
            for name, change in edits[n.op_type]:
                old = G.attr(n, name)
                new = change(old)
                if new is None or new == old:
                    continue

                def apply(ctx, r=r, i=i, name=name, new=new):
                    G.set_attr(at(ctx, r, i), name, new)

                yield Mutant(fx, "change_attribute", "r%d:%s:%s" % (r, G.node_label(n), name),
                             "%s %s -> %s" % (name, old, new), apply)


# --- which rank holds what ---------------------------------------------------------
def op_swap_rank_weights(fx):
    """Rank a holds the shard of rank b of one weight and vice versa: the spec
    says the reference weight is the concatenation with a and b exchanged."""
    pairs = [(0, 1)] + ([(0, fx.P - 1)] if fx.P > 2 else [])
    for name, p in fx.spec.get("inputs", {}).items():
        if not isinstance(p, dict) or "shard" not in p or "*" in name:
            continue
        local = str(p.get("as", name))
        for a, b in pairs:
            order = list(range(fx.P))
            order[a], order[b] = b, a

            # A training step's gradient sits like its parameter (grads:
            # like_params), which a relation placement does not give: the
            # gradient gets the same exchanged concatenation, spelled out.
            grad = "grad:" + name
            has_grad = fx.spec.get("grads") == "like_params" and any(
                o.name == grad for o in fx.models[0].graph.output)

            def apply(ctx, name=name, local=local, order=order, axis=p["shard"], grad=grad, has_grad=has_grad):
                parts = ", ".join("%s@%d" % (local.replace("{r}", str(r)), r) for r in order)
                ctx.spec["inputs"][name] = {"relation": "concat(%s, axis=%d)" % (parts, axis)}
                if has_grad:
                    gparts = ", ".join('"%s"@%d' % (grad, r) for r in order)
                    ctx.spec.setdefault("outputs", {})[grad] = {"relation": "concat(%s, axis=%d)" % (gparts, axis)}

            yield Mutant(fx, "swap_rank_weights", "%s:r%d<->r%d" % (name, a, b),
                         "shards of ranks %d and %d exchanged" % (a, b), apply)


def op_swap_rank_graphs(fx):
    """Run rank a's graph on rank b and vice versa. Generated only for ranks
    whose graphs differ once the data of spec-placed weights is ignored (two
    equal graphs swapped are the same program: harmless by construction)."""
    stripped = [G.strip_placed_data(m, fx.placed[r]) for r, m in enumerate(fx.models)]
    for a in range(fx.P):
        for b in range(a + 1, fx.P):
            if stripped[a] == stripped[b]:
                continue

            def apply(ctx, a=a, b=b):
                ctx.ranks[a], ctx.ranks[b] = ctx.ranks[b], ctx.ranks[a]

            yield Mutant(fx, "swap_rank_graphs", "r%d<->r%d" % (a, b),
                         "rank files %d and %d exchanged" % (a, b), apply)


OPERATORS = [op_drop_collective, op_collective_axis, op_slice_bound, op_swap_operands,
             op_shard_offset, op_scale_by_p, op_mask, op_change_constant, op_change_attribute,
             op_swap_rank_weights, op_swap_rank_graphs]
