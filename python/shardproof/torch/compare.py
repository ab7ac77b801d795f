"""Finds where two exports of one graph at different example sizes differ:
the place where a size was baked in, said in the user's terms."""
import onnx
from onnx import numpy_helper

HOW_TO_AVOID = ("a size read from a tensor's .shape was used as a Python int (int(...), arithmetic in "
                "Python, a shape-dependent Python branch, or a tensor created from it with a fixed size); "
                "keep sizes as tensors (x.size(i) directly in torch ops, x.view(-1, ...), "
                "torch.arange(x.size(1)), new tensors built from x with *_like or expand) so they stay symbolic")


def _dims(value_info):
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?")
            for d in t.shape.dim]


def _module(node_name):
    parts = [p for p in node_name.split("/") if p]
    return ".".join(parts[:-1]) or "(top level)"


def _values(sizes):
    return " and ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in sizes)


def first_difference(a, b, sizes):
    """None if the serialized models are identical, else one sentence naming
    the first difference: an input or output axis, a node attribute or a
    constant, with its module."""
    if a.SerializeToString() == b.SerializeToString():
        return None
    at = f"exported at {_values(sizes)}"
    for kind, xs, ys in (("input", a.graph.input, b.graph.input), ("output", a.graph.output, b.graph.output)):
        for x, y in zip(xs, ys):
            dx, dy = _dims(x), _dims(y)
            if dx != dy and dx is not None and dy is not None and len(dx) == len(dy):
                for axis, (p, q) in enumerate(zip(dx, dy)):
                    if p != q:
                        return (f"{kind} '{x.name}' axis {axis} is {p} in one export and {q} in the other "
                                f"({at}); name that axis in the dynamic axes, or {HOW_TO_AVOID}")
    for n, m in zip(a.graph.node, b.graph.node):
        if n.SerializeToString() == m.SerializeToString():
            continue
        where = f"node '{n.name or n.op_type}' ({n.op_type}, module {_module(n.name)})"
        if n.op_type != m.op_type or list(n.input) != list(m.input):
            return f"the graphs take different paths from {where} on ({at}): {HOW_TO_AVOID}"
        for x, y in zip(n.attribute, m.attribute):
            if x.SerializeToString() != y.SerializeToString():
                if x.type == onnx.AttributeProto.TENSOR:
                    vx, vy = numpy_helper.to_array(x.t).tolist(), numpy_helper.to_array(y.t).tolist()
                    return (f"{where} holds the constant {vx} in one export and {vy} in the other ({at}): "
                            f"{HOW_TO_AVOID}")
                return f"{where}'s attribute '{x.name}' differs between the exports ({at}): {HOW_TO_AVOID}"
        return f"{where} differs between the exports ({at}): {HOW_TO_AVOID}"
    if len(a.graph.node) != len(b.graph.node):
        return (f"the exports have {len(a.graph.node)} and {len(b.graph.node)} nodes ({at}): "
                f"{HOW_TO_AVOID}")
    for x, y in zip(a.graph.initializer, b.graph.initializer):
        if x.SerializeToString() != y.SerializeToString():
            return f"the constant '{x.name}' differs between the exports ({at}): {HOW_TO_AVOID}"
    return f"the exports differ ({at}): {HOW_TO_AVOID}"


def size_coincidence_hint(model, points):
    """The other cause of exports that differ although the model keeps its
    sizes symbolic: an example size equal to a fixed dimension, which the
    tracer cannot tell from the size (seen with a head count: a view to
    [batch, seq, heads, head_dim] at seq == heads). Names the sizes equal to
    a fixed dimension of `model`'s inputs and parameters, as 'seq=8
    (export 2)'; dimensions that are not on an input are not found."""
    fixed = set()
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        for d in _dims(vi) or []:
            if isinstance(d, int) and d >= 2:
                fixed.add(d)
    same = [f"{n}={v} (export {k + 1})" for k, point in enumerate(points) for n, v in sorted(point.items())
            if v in fixed]
    return ("or, if the model does keep its sizes symbolic, an example size equals a fixed dimension (a width, "
            "a head count), which the tracer cannot tell apart from the size"
            + (f" (here {', '.join(same)})" if same else "")
            + f": try other example sizes with Case.sizes (exported at {_values(points)})")
