"""Matmuls put back together after autograd took them apart.

Under autograd torch decomposes `linear` and `matmul` of a [s, b, k] input
into view [s*b, k] -> mm (or addmm with the bias) -> view [s, b, n], and
a batched matmul of [b, h, s, d] into expand -> view [b*h, s, d] -> bmm ->
view [b, h, s, t]. The
prover would then reason through the // and % of the flattened rows at every
use; the forward capture keeps them whole (torch.export's table), and this
pass gives the training step's graph the same shape: such a chain becomes one
`aten.matmul` (plus the bias), exactly equal, since flattening the leading
dims, multiplying rows, and unflattening is what matmul does. The flattened
nodes stay for the backward nodes that read them.
"""
import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _shape(node):
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return list(v.shape) if isinstance(v, torch.Tensor) else None


def _same(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return statically_known_true(a == b)


def _flattened(view, k):
    """The tensor `view` flattens to [rows, k] rows-first, or None."""
    if not isinstance(view, torch.fx.Node) or view.target not in _VIEWS:
        return None
    x = view.args[0]
    xs = _shape(x)
    if xs is None or len(xs) < 3 or not _same(xs[-1], k):
        return None
    return x


def _parts(mm):
    """(flattened input view, weight, bias or None) of an mm/addmm node."""
    if mm.target is aten.mm.default:
        return mm.args[0], mm.args[1], None
    if mm.target is aten.addmm.default and mm.kwargs.get("beta", 1) == 1 and mm.kwargs.get("alpha", 1) == 1:
        bias, a, w = mm.args[:3]
        return (a, w, bias) if _shape(bias) is not None and len(_shape(bias)) == 1 else (None, None, None)
    return None, None, None


def _unflattened(op):
    """(x, transposed) when `op` is a view of x that flattens its batch dims,
    or such a view with its last two dims swapped (autograd's backward of a
    bmm); clones (a copy for contiguity) are looked through."""
    transposed = False
    if isinstance(op, torch.fx.Node) and op.target is aten.permute.default and list(op.args[1]) == [0, 2, 1]:
        op, transposed = op.args[0], True
    if not isinstance(op, torch.fx.Node) or op.target not in _VIEWS:
        return None, False
    x = op.args[0]
    while isinstance(x, torch.fx.Node) and x.target is aten.clone.default:
        x = x.args[0]
    return x, transposed


def _swapped(shape, transposed):
    return shape[:-2] + [shape[-1], shape[-2]] if transposed and shape is not None else shape


def _batched(graph, node, mm):
    """matmul(x, y) for view(bmm(view(x), view(y)), S) with x [*batch, n, m],
    y [*batch, m, p] and S [*batch, n, p] (either operand possibly
    transposed after the view), else None."""
    (x, tx), (y, ty) = _unflattened(mm.args[0]), _unflattened(mm.args[1])
    xs, ys, out = _swapped(_shape(x), tx), _swapped(_shape(y), ty), _shape(node)
    if xs is None or ys is None or out is None or not len(xs) == len(ys) == len(out) or len(out) < 4:
        return None
    want_x, want_y = out[:-1] + [xs[-1]], out[:-2] + [xs[-1], out[-1]]
    if not (all(_same(p, q) for p, q in zip(xs, want_x)) and all(_same(p, q) for p, q in zip(ys, want_y))):
        return None
    return _transposed(graph, node, x, tx), _transposed(graph, node, y, ty)


def _transposed(graph, before, x, transposed):
    if not transposed:
        return x
    val = x.meta["val"]
    with graph.inserting_before(before), val.fake_mode:
        t = graph.call_function(aten.transpose.int, (x, -2, -1))
        t.meta = {**before.meta, "val": val.transpose(-2, -1)}
    return t


def _fold_one(graph, node):
    mm = node.args[0]
    if not isinstance(mm, torch.fx.Node):
        return False
    bias = None
    if mm.target is aten.bmm.default:
        pair = _batched(graph, node, mm)
        if pair is None:
            return False
        x, w = pair
    else:
        a, w, bias = _parts(mm)
        ws, out = _shape(w) if a is not None else None, _shape(node)
        if ws is None or out is None or len(ws) != 2:
            return False
        x = _flattened(a, ws[0])
        if x is None or len(_shape(x)) != len(out) or \
                not all(_same(p, q) for p, q in zip(_shape(x)[:-1], out[:-1])):
            return False
    with graph.inserting_before(node):
        new = graph.call_function(aten.matmul.default, (x, w))
        new.meta = {**mm.meta, "val": node.meta["val"]}
        if bias is not None:
            new = graph.call_function(aten.add.Tensor, (new, bias))
            new.meta = {**mm.meta, "val": node.meta["val"]}
    node.replace_all_uses_with(new)
    return True


def refold_matmuls(gm):
    """Rewrites gm in place; returns how many matmuls were refolded."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _VIEWS:
            count += _fold_one(gm.graph, node)
    if count:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return count
