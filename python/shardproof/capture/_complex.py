"""Complex tensors (Meta's rotary embedding: torch.polar, view_as_complex) as
the real tensors view_as_real makes of them: the same shape with a trailing
axis of 2, (real, imaginary). view_as_complex and view_as_real are then the
identity, a product is written out, (a + bi)(c + di) = (ac - bd) + (ad + bc)i,
and ops that only move elements keep their rows, since a complex tensor's
non-negative axes are the real one's. An op on complex values without a row
here is an error naming it, never a guess.
"""
import torch

from . import _aten
from ._aten import axis, operand, out_val, rank_of, unsupported

aten = torch.ops.aten
ROWS = {}


def is_complex(node):
    """Whether the FX node reads or makes a complex tensor."""
    vals = [out_val(node)] + [a.meta.get("val") for a in node.all_input_nodes]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in vals)


def row(*ops):
    return _aten.row(*ops, table=ROWS)


# Ops that move elements along the complex tensor's own axes: the real rows.
for _op in (aten.slice.Tensor, aten.select.int, aten.unsqueeze.default, aten.clone.default, aten.alias.default,
            aten.cat.default, aten.squeeze.dim, aten.detach.default, aten._assert_tensor_metadata.default):
    ROWS[_op] = _aten.ROWS[_op]


@row(aten.view_as_complex.default, aten.view_as_real.default)
def _same(w, node, x):
    return w.value(x)


@row(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(w, node, x, size):
    return w.emit("Reshape", [w.value(x), w.ints(list(size) + [2])])


@row(aten.permute.default)
def _permute(w, node, x, dims):
    r = rank_of(x)
    return w.emit("Transpose", [w.value(x)], perm=[axis(d, r) for d in dims] + [r])


def _parts(w, v):
    """(real, imaginary) of a complex value, each without the trailing axis."""
    return [w.emit("Gather", [v, w.const(i, torch.int64)], axis=-1) for i in (0, 1)]


def _join(w, re, im):
    last = w.const([-1], torch.int64)
    return w.emit("Concat", [w.emit("Unsqueeze", [re, last]), w.emit("Unsqueeze", [im, last])], axis=-1)


def _real_operand(w, x, dtype):
    """A real operand of a complex op, broadcast over the trailing axis."""
    v = operand(w, x, dtype)
    if isinstance(x, torch.fx.Node) and out_val(x).dim() > 0:
        v = w.emit("Unsqueeze", [v, w.const([-1], torch.int64)])
    return v


def _complex_arg(x):
    return isinstance(x, torch.fx.Node) and out_val(x).is_complex()


@row(aten.mul.Tensor)
def _mul(w, node, a, b):
    dt = torch.float32 if out_val(node).dtype == torch.complex64 else torch.float64
    if _complex_arg(a) and _complex_arg(b):
        (ar, ai), (br, bi) = _parts(w, w.value(a)), _parts(w, w.value(b))
        re = w.emit("Sub", [w.emit("Mul", [ar, br]), w.emit("Mul", [ai, bi])])
        im = w.emit("Add", [w.emit("Mul", [ar, bi]), w.emit("Mul", [ai, br])])
        return _join(w, re, im)
    c, r = (a, b) if _complex_arg(a) else (b, a)
    if isinstance(r, complex):
        unsupported(w, "a product with a complex Python number")
    return w.emit("Mul", [w.value(c), _real_operand(w, r, dt)])


@row(aten.add.Tensor, aten.sub.Tensor)
def _add(w, node, a, b, alpha=1):
    if not (_complex_arg(a) and _complex_arg(b)) or alpha != 1:
        unsupported(w, "a complex sum other than of two complex tensors")
    return w.emit("Add" if node.target is aten.add.Tensor else "Sub", [w.value(a), w.value(b)])


@row(aten.polar.default)
def _polar(w, node, magnitude, angle):
    m, t = w.value(magnitude), w.value(angle)
    return _join(w, w.emit("Mul", [m, w.emit("Cos", [t])]), w.emit("Mul", [m, w.emit("Sin", [t])]))
