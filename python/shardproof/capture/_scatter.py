"""The scatters of torch's backward graphs: an embedding's x[ids] += g, a
gather's scatter_add, a slice's slice_scatter. A scatter by data is written
as a one-hot of the indices (Equal against the positions, Cast) contracted
with the values, which the prover reads as a sum over positions; a
slice_scatter is the slices around the new part."""
import torch

from ._aten import INT64_MAX, axis, out_val, rank_of, row, unsupported
from ._onnx import onnx_dtype

aten = torch.ops.aten


def _one_hot(w, index, n, axis_of_n, rank, dtype):
    """Cast(index == position) with the positions 0..n-1 on axis `axis_of_n`
    of a rank-`rank` result: `index` holds size 1 there already."""
    positions = w.emit("Range", [w.const(0, torch.int64), w.scalar(n), w.const(1, torch.int64)])
    shape = [1] * rank
    shape[axis_of_n] = -1
    positions = w.emit("Reshape", [positions, w.const(shape, torch.int64)])
    return w.emit("Cast", [w.emit("Equal", [index, positions])], to=onnx_dtype(dtype))


def accumulate_rows(w, node, x, ids, values):
    """x[ids] += values: row v of x gains the values at every position whose
    id is v (ids [*I], values [*I, *rest], x [n, *rest])."""
    lead, rest = rank_of(ids), rank_of(x) - 1
    if rank_of(values) != lead + rest:
        unsupported(w, "x[ids] += values with values not shaped [*ids.shape, *x.shape[1:]]")
    dt = out_val(node).dtype
    ids_v = w.emit("Unsqueeze", [w.value(ids), w.const(list(range(lead, lead + 1 + rest)), torch.int64)])
    hot = _one_hot(w, ids_v, out_val(x).shape[0], lead, lead + 1 + rest, dt)      # [*I, n, 1...]
    vals = w.emit("Unsqueeze", [w.value(values), w.const([lead], torch.int64)])   # [*I, 1, *rest]
    summed = w.emit("ReduceSum", [w.emit("Mul", [hot, vals]), w.const(list(range(lead)), torch.int64)], keepdims=0)
    return w.emit("Add", [w.value(x), summed])


@row(aten.scatter_add.default)
def _scatter_add(w, node, x, dim, index, src):
    """x.scatter_add(dim, index, src): element j along `dim` gains src at
    every k with index[k] == j (the backward of a gather)."""
    r, d = rank_of(x), axis(dim, rank_of(x))
    xs, ixs, ss = list(out_val(x).shape), list(out_val(index).shape), list(out_val(src).shape)
    if len(ixs) != r or len(ss) != r or any(a is not b and str(a) != str(b) for a, b in zip(ixs, ss)) or \
            any(str(ixs[i]) != str(xs[i]) for i in range(r) if i != d):
        unsupported(w, "scatter_add whose index is not shaped like src and like x off the scattered axis")
    idx = w.emit("Unsqueeze", [w.value(index), w.const([d + 1], torch.int64)])      # [.., K, 1, ..]
    hot = _one_hot(w, idx, xs[d], d + 1, r + 1, out_val(node).dtype)                 # [.., K, n, ..]
    vals = w.emit("Unsqueeze", [w.value(src), w.const([d + 1], torch.int64)])
    summed = w.emit("ReduceSum", [w.emit("Mul", [hot, vals]), w.const([d], torch.int64)], keepdims=0)
    return w.emit("Add", [w.value(x), summed])


@row(aten.slice_scatter.default)
def _slice_scatter(w, node, x, src, dim=0, start=None, end=None, step=1):
    """x with x[start:end] along `dim` replaced by src (the backward of a
    slice): the slices of x before and after around src."""
    a, start = axis(dim, rank_of(x)), 0 if start is None else start
    if step != 1 or (isinstance(start, int) and start < 0) or (isinstance(end, int) and end < 0):
        unsupported(w, f"slice_scatter with step {step}, start {start}, end {end} (steps of 1, bounds >= 0)")
    end = INT64_MAX if end is None else end
    parts = []
    if not (isinstance(start, int) and start == 0):
        parts.append(w.emit("Slice", [w.value(x), w.ints([0]), w.ints([start]), w.const([a], torch.int64)]))
    parts.append(w.value(src))
    if not (isinstance(end, int) and end >= INT64_MAX):
        parts.append(w.emit("Slice", [w.value(x), w.ints([end]), w.const([INT64_MAX], torch.int64),
                                      w.const([a], torch.int64)]))
    return parts[0] if len(parts) == 1 else w.emit("Concat", parts, axis=a)
