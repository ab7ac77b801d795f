"""Sizes the backward pass bakes in, written back as shape arithmetic.

torch's autograd saves plain integers for the shapes its backward needs (the
sum of a [seq, batch, h] tensor expands its gradient back to [6, 4, 8]), so a
traced training step holds constants that depend on the example sizes even
when the user's code keeps every size symbolic. The step is exported at three
example sizes; a constant that differs between them is rewritten as nodes that
compute it from the graph inputs' shapes when every element is one fixed
integer or k * a product of declared sizes (the same k and product at all
three sizes; exactly one such product of least degree; an integer's k may be
a fraction, seq / P for a shard of a sequence that no input declares, computed
as an integer division that is exact at every export). Anything else stays
an error: a constant that no product of sizes explains is not guessed.
"""
import itertools
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

_MAX_EXPONENT = 2


def third_sizes(sizes):
    """A third size assignment from the first two (multiples of the world size stay multiples)."""
    a, b = sizes
    return {n: 2 * b[n] - a[n] for n in a}


def _fit(values, points, names):
    """(k, exponents) with values[p] == k * prod(points[p][n] ** e) for every p,
    of least total degree and unique at that degree; None if there is none."""
    exact = all(isinstance(v, int) for v in values)
    powers = range(-1 if not exact else 0, _MAX_EXPONENT + 1)
    found = []
    for exps in itertools.product(powers, repeat=len(names)):
        if not any(exps):
            continue
        dens = [Fraction(1) for _ in points]
        for p, point in enumerate(points):
            for n, e in zip(names, exps):
                dens[p] *= Fraction(point[n]) ** e
        if exact:
            k = Fraction(values[0]) / dens[0]
            ok = all(Fraction(v) == k * d for v, d in zip(values, dens))
        else:
            k = values[0] / float(dens[0])
            ok = k != 0 and all(abs(v - k * float(d)) <= 1e-6 * max(1.0, abs(v)) for v, d in zip(values, dens))
        if ok:
            found.append((sum(abs(e) for e in exps), k, exps))
    if not found:
        return None
    least = min(f[0] for f in found)
    best = [f for f in found if f[0] == least]
    return None if len(best) != 1 else (best[0][1], best[0][2])


def _tensor_type(dtype):
    """ONNX's element type for a numpy dtype (onnx 1.12 has only the mapping table)."""
    if hasattr(helper, "np_dtype_to_tensor_dtype"):
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]


class _Builder:
    def __init__(self, prefix, axes):
        self.prefix, self.axes, self.nodes, self.count = prefix, axes, [], 0

    def name(self):
        self.count += 1
        return f"{self.prefix}/{self.count}"

    def op(self, op_type, inputs, **attrs):
        out = self.name()
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, array):
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(array)))

    def size(self, symbol):
        """The 0-d int64 size of `symbol`, read from the input axis that declares it."""
        tensor, axis = self.axes[symbol]
        shape = self.op("Shape", [tensor])
        return self.op("Gather", [shape, self.const(np.array(axis, dtype=np.int64))], axis=0)

    def monomial(self, k, exps, names, dtype):
        """k * prod(size ** e) as a 0-d tensor of `dtype`."""
        num = [self.size(n) for n, e in zip(names, exps) for _ in range(max(e, 0))]
        den = [self.size(n) for n, e in zip(names, exps) for _ in range(max(-e, 0))]
        value = num[0] if num else self.const(np.array(1, dtype=np.int64))
        for x in num[1:]:
            value = self.op("Mul", [value, x])
        if dtype != np.int64:
            value = self.op("Cast", [value], to=_tensor_type(dtype))
            for x in den:
                value = self.op("Div", [value, self.op("Cast", [x], to=_tensor_type(dtype))])
        if dtype == np.int64 and k.denominator != 1:
            # A shard's length (seq / P): exact at every export, so the
            # integer division never truncates there.
            if k.numerator != 1:
                value = self.op("Mul", [value, self.const(np.array(k.numerator, dtype=dtype))])
            return self.op("Div", [value, self.const(np.array(k.denominator, dtype=dtype))])
        if k != 1:
            kk = np.array(int(k) if dtype == np.int64 else float(k), dtype=dtype)
            value = self.op("Mul", [value, self.const(kk)])
        return value


def _constant(node):
    if node.op_type != "Constant" or len(node.attribute) != 1 or node.attribute[0].name != "value":
        return None
    return numpy_helper.to_array(node.attribute[0].t)


def _elements(b, per_element, dtype, points, names):
    """One 0-d node per element, element i taking per_element[i] (its value in
    each export): fixed, or k * a product of sizes. Returns their output
    names, or None when an element fits neither."""
    elements = []
    for values in per_element:
        if all(v == values[0] for v in values):
            elements.append(b.const(np.array(values[0], dtype=dtype)))
            continue
        fit = _fit(values, points, names)
        if fit is None or (dtype == np.int64 and any(e < 0 for e in fit[1])):
            return None
        elements.append(b.monomial(fit[0], fit[1], names, np.dtype(dtype).type))
    return elements


def _stack(b, elements):
    """The 0-d `elements` as one 1-d tensor (Unsqueeze each, Concat)."""
    zero = b.const(np.array([0], dtype=np.int64))
    parts = [b.op("Unsqueeze", [e, zero]) for e in elements]
    return b.op("Concat", parts, axis=0) if len(parts) > 1 else parts[0]


def _filled(node, arrays, points, names, axes):
    """A constant filled with one value whose shape follows the sizes (autograd's
    zeros for a gradient that does not flow somewhere): ConstantOfShape of the
    shape computed from the inputs, or None."""
    first = arrays[0]
    if first.ndim == 0 or any(a.ndim != first.ndim or a.dtype != first.dtype or a.size == 0 for a in arrays):
        return None
    fill = first.reshape(-1)[0]
    if any(not (a == fill).all() for a in arrays):
        return None
    b = _Builder(f"/shardproof_sizes{node.name or node.output[0]}", axes)
    dims = _elements(b, [[a.shape[d] for a in arrays] for d in range(first.ndim)], np.int64, points, names)
    if dims is None:
        return None
    shape = _stack(b, dims)
    b.op("ConstantOfShape", [shape], value=numpy_helper.from_array(np.array([fill], dtype=first.dtype)))
    b.nodes[-1].output[0] = node.output[0]
    return b.nodes


def _rewrite(node, arrays, points, names, axes):
    """Nodes computing `node`'s constant from the input shapes, or None."""
    first = arrays[0]
    if any(a.shape != first.shape for a in arrays):
        return _filled(node, arrays, points, names, axes)
    if any(a.dtype != first.dtype for a in arrays) or first.ndim > 1:
        return None
    if first.dtype not in (np.int64, np.float32, np.float64):
        return None
    b = _Builder(f"/shardproof_sizes{node.name or node.output[0]}", axes)
    elements = _elements(b, [[a.reshape(-1)[i].item() for a in arrays] for i in range(first.size)], first.dtype,
                       points, names)
    if elements is None:
        return None
    last = elements[0] if first.ndim == 0 else _stack(b, elements)
    out = b.nodes[-1]
    if last != out.output[0]:
        return None
    out.output[0] = node.output[0]  # consumers keep reading the constant's name
    return b.nodes


def symbolize(models, feeds, dynamic):
    """models: one graph exported with each of `feeds` (its example inputs,
    at least 3 sets). Returns models[0] with every size-dependent Constant
    computed from the inputs' shapes, or None when the exports differ in any
    other way or a constant is not k * a product of declared sizes."""
    axes = {}
    for tensor, dims in dynamic.items():
        for axis, symbol in sorted(dims.items()):
            axes.setdefault(symbol, (tensor, axis))
    inputs = {i.name for i in models[0].graph.input}
    axes = {s: v for s, v in axes.items() if v[0] in inputs and v[0] in feeds[0]}
    names = sorted(axes)
    # Each symbol's value in each export, read from the tensors actually fed.
    points = [{n: int(feed[axes[n][0]].shape[axes[n][1]]) for n in names} for feed in feeds]
    if any(len(m.graph.node) != len(models[0].graph.node) for m in models):
        return None
    results = []
    for model in models[:2]:
        out = onnx.ModelProto()
        out.CopyFrom(model)
        del out.graph.node[:]
        for k, node in enumerate(model.graph.node):
            others = [m.graph.node[k] for m in models]
            if all(o.SerializeToString() == node.SerializeToString() for o in others):
                out.graph.node.append(node)
                continue
            arrays = [_constant(o) for o in others]
            if any(a is None for a in arrays) or any(o.name != node.name for o in others):
                return None
            nodes = _rewrite(node, arrays, points, names, axes)
            if nodes is None:
                return None
            out.graph.node.extend(nodes)
        results.append(out)
    # Rewritten at either size, the graph must now be the same.
    if results[0].SerializeToString() != results[1].SerializeToString():
        return None
    return results[0]
