"""The table: one row per ATen op of torch.export's functional core-ATen graph.

A row takes the Writer, the FX node and the node's arguments (other FX nodes
already written, Python numbers, lists of sizes) and returns the ONNX value(s)
it emitted. Rows follow torch's semantics exactly (broadcasting, negative
axes, `alpha` factors, integer floor division); an argument a row does not
handle raises CaptureError naming the op, never a silent approximation.
"""
import math

import torch

from ._onnx import onnx_dtype
from ._world import CaptureError, ranks_of

aten = torch.ops.aten
c10d = torch.ops._c10d_functional
INT64_MAX = 2**63 - 1

ROWS = {}


def row(*ops, table=ROWS):
    def register(fn):
        for op in ops:
            table[op] = fn
        return fn
    return register


def out_val(node, i=None):
    v = node.meta.get("val")
    return v[i] if i is not None else v


def rank_of(node):
    return out_val(node).dim()


def axis(a, rank):
    return a + rank if a < 0 else a


def operand(w, x, dtype):
    """A tensor operand: an FX node's value, or a Python number as a constant
    of `dtype` (torch's type promotion keeps the tensor's dtype)."""
    if isinstance(x, torch.fx.Node):
        v = w.value(x)
        return v if isinstance(v, str) else w.const(v, dtype)
    if isinstance(x, torch.SymInt):
        return w.cast(w.scalar(x), dtype)
    if isinstance(x, (bool, int, float)):
        return w.const(x, dtype)
    raise CaptureError(f"{w.where()}: unsupported operand {x!r}")


def unsupported(w, why):
    raise CaptureError(f"{w.where()}: {why}")


# --- elementwise --------------------------------------------------------------

def _binary(op):
    def convert(w, node, a, b, **kw):
        dt = out_val(node).dtype
        if op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
            dt = _common_dtype(a, b)
        x, y = operand(w, a, dt), operand(w, b, dt)
        alpha = kw.get("alpha", 1)
        if alpha != 1:
            y = w.emit("Mul", [y, w.const(alpha, dt)])
        return w.emit(op, [x, y])
    return convert


def _common_dtype(a, b):
    for x in (a, b):
        if isinstance(x, torch.fx.Node) and isinstance(out_val(x), torch.Tensor):
            return out_val(x).dtype
    return torch.float32


for _ops, _onnx in (((aten.add.Tensor, aten.add.Scalar), "Add"), ((aten.sub.Tensor, aten.sub.Scalar), "Sub"),
                    ((aten.mul.Tensor, aten.mul.Scalar), "Mul"), ((aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor), "Pow"),
                    ((aten.maximum.default,), "Max"), ((aten.minimum.default,), "Min"),
                    ((aten.eq.Tensor, aten.eq.Scalar), "Equal"), ((aten.lt.Tensor, aten.lt.Scalar), "Less"),
                    ((aten.gt.Tensor, aten.gt.Scalar), "Greater"), ((aten.le.Tensor, aten.le.Scalar), "LessOrEqual"),
                    ((aten.ge.Tensor, aten.ge.Scalar), "GreaterOrEqual"),
                    ((aten.logical_and.default, aten.bitwise_and.Tensor), "And"),
                    ((aten.logical_or.default, aten.bitwise_or.Tensor), "Or")):
    row(*_ops)(_binary(_onnx))


@row(aten.ne.Tensor, aten.ne.Scalar)
def _ne(w, node, a, b):
    return w.emit("Not", [_binary("Equal")(w, node, a, b)])


@row(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(w, node, a, b, alpha=1):
    return _binary("Sub")(w, node, b, a) if alpha == 1 else unsupported(w, "rsub with alpha")


@row(aten.div.Tensor, aten.div.Scalar)
def _div(w, node, a, b):
    dt = out_val(node).dtype
    if not dt.is_floating_point:
        unsupported(w, "true division of integers")
    return w.emit("Div", [operand(w, a, dt), operand(w, b, dt)])


@row(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(w, node, a, b, rounding_mode=None):
    dt = out_val(node).dtype
    x, y = operand(w, a, dt), operand(w, b, dt)
    if rounding_mode is None:
        return w.emit("Div", [x, y])
    if dt.is_floating_point:
        if rounding_mode != "floor":
            unsupported(w, "floating-point division rounding toward zero")
        return w.emit("Floor", [w.emit("Div", [x, y])])
    if rounding_mode == "trunc":
        return w.emit("Div", [x, y])  # ONNX integer Div truncates
    # Python's floor division: x - x mod y (the divisor's sign) divides exactly.
    return w.emit("Div", [w.emit("Sub", [x, w.emit("Mod", [x, y], fmod=0)]), y])


@row(aten.remainder.Tensor, aten.remainder.Scalar)
def _remainder(w, node, a, b):
    dt = out_val(node).dtype
    if dt.is_floating_point:
        unsupported(w, "floating-point remainder")
    return w.emit("Mod", [operand(w, a, dt), operand(w, b, dt)], fmod=0)


def _unary(op):
    return lambda w, node, x: w.emit(op, [w.value(x)])


for _op, _onnx in ((aten.neg.default, "Neg"), (aten.exp.default, "Exp"), (aten.log.default, "Log"),
                   (aten.sqrt.default, "Sqrt"), (aten.tanh.default, "Tanh"), (aten.sigmoid.default, "Sigmoid"),
                   (aten.relu.default, "Relu"), (aten.erf.default, "Erf"), (aten.sin.default, "Sin"),
                   (aten.cos.default, "Cos"), (aten.abs.default, "Abs"), (aten.reciprocal.default, "Reciprocal"),
                   (aten.floor.default, "Floor"), (aten.ceil.default, "Ceil"), (aten.round.default, "Round"),
                   (aten.sign.default, "Sign"), (aten.logical_not.default, "Not"),
                   (aten.bitwise_not.default, "Not")):
    row(_op)(_unary(_onnx))


@row(aten.rsqrt.default)
def _rsqrt(w, node, x):
    return w.emit("Reciprocal", [w.emit("Sqrt", [w.value(x)])])


@row(aten.silu.default)
def _silu(w, node, x):
    return w.emit("Mul", [w.value(x), w.emit("Sigmoid", [w.value(x)])])


@row(aten.gelu.default)
def _gelu(w, node, x, approximate="none"):
    dt, v = out_val(node).dtype, w.value(x)
    if approximate == "none":  # x * (erf(x / sqrt 2) + 1) / 2, as torch.onnx writes it
        e = w.emit("Erf", [w.emit("Div", [v, w.const(math.sqrt(2.0), dt)])])
        return w.emit("Mul", [w.emit("Mul", [v, w.emit("Add", [e, w.const(1.0, dt)])]), w.const(0.5, dt)])
    cube = w.emit("Mul", [w.emit("Mul", [w.emit("Mul", [v, v]), v]), w.const(0.044715, dt)])
    inner = w.emit("Mul", [w.emit("Add", [v, cube]), w.const(math.sqrt(2.0 / math.pi), dt)])
    t = w.emit("Add", [w.emit("Tanh", [inner]), w.const(1.0, dt)])
    return w.emit("Mul", [w.emit("Mul", [v, t]), w.const(0.5, dt)])


@row(aten.where.self)
def _where(w, node, c, a, b):
    dt = out_val(node).dtype
    return w.emit("Where", [w.value(c), operand(w, a, dt), operand(w, b, dt)])


@row(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(w, node, x, mask, value):
    return w.emit("Where", [w.value(mask), operand(w, value, out_val(node).dtype), w.value(x)])


@row(aten.clamp.default)
def _clamp(w, node, x, lo=None, hi=None):
    dt = out_val(node).dtype
    bound = lambda v: "" if v is None else operand(w, v, dt)  # noqa: E731
    return w.emit("Clip", [w.value(x), bound(lo), bound(hi)])


@row(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
     aten.contiguous.default)
def _identity(w, node, x, **kw):
    return w.value(x)  # the same values: no node, so view folding sees through it


@row(aten._to_copy.default)
def _to_copy(w, node, x, dtype=None, **kw):
    src, dst = out_val(x).dtype, out_val(node).dtype
    return w.value(x) if src == dst else w.emit("Cast", [w.value(x)], to=onnx_dtype(dst))


@row(aten.copy.default)
def _copy(w, node, dst, src, non_blocking=False):
    """dst's shape and dtype, src's values (broadcast)."""
    v = w.value(src)
    if out_val(src).dtype != out_val(dst).dtype:
        v = w.emit("Cast", [v], to=onnx_dtype(out_val(dst).dtype))
    if same_shape(out_val(src).shape, out_val(dst).shape):
        return v
    return w.emit("Expand", [v, w.emit("Shape", [w.value(dst)])])


# --- shapes -------------------------------------------------------------------

@row(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def _view(w, node, x, size):
    if any(isinstance(s, int) and s == 0 for s in size):
        unsupported(w, "a view with a size of 0")  # ONNX Reshape reads 0 as 'keep this dim'
    # A view of a view reads the first one's source in the same order; one
    # back to the source's shape is the source (functionalization writes a
    # collective on `t.view(-1)` as view, reduce, view back).
    base, base_shape = w.value(x), out_val(x).shape
    while base in w.reshaped:
        base, base_shape = w.reshaped[base]
    if same_shape(base_shape, out_val(node).shape):
        return base
    out = w.emit("Reshape", [base, w.ints(size)])
    w.reshaped[out] = (base, base_shape)
    return out


def same_shape(a, b):
    key = lambda d: d if isinstance(d, int) else d.node.expr  # noqa: E731
    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b))


@row(aten.permute.default, aten.permute_copy.default)
def _permute(w, node, x, dims):
    r = rank_of(x)
    return w.emit("Transpose", [w.value(x)], perm=[axis(d, r) for d in dims])


@row(aten.t.default)
def _t(w, node, x):
    return w.emit("Transpose", [w.value(x)], perm=[1, 0]) if rank_of(x) == 2 else w.emit("Identity", [w.value(x)])


@row(aten.transpose.int)
def _transpose(w, node, x, a, b):
    r = rank_of(x)
    perm = list(range(r))
    perm[axis(a, r)], perm[axis(b, r)] = perm[axis(b, r)], perm[axis(a, r)]
    return w.emit("Transpose", [w.value(x)], perm=perm)


@row(aten.expand.default, aten.expand_copy.default)
def _expand(w, node, x, size, implicit=False):
    r, n = rank_of(x), len(size)
    sizes = list(size)
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:  # keep the input's size, aligned from the right
            sizes[i] = out_val(x).shape[i - (n - r)]
    return w.emit("Expand", [w.value(x), w.ints(sizes)])


@row(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def _unsqueeze(w, node, x, dim):
    return w.emit("Unsqueeze", [w.value(x), w.const([axis(dim, rank_of(x) + 1)], torch.int64)])


@row(aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default)
def _squeeze(w, node, x, dims=None):
    r = rank_of(x)
    shape = out_val(x).shape
    if dims is None:
        dims = [i for i in range(r) if isinstance(shape[i], int) and shape[i] == 1]
    dims = [dims] if isinstance(dims, int) else list(dims)
    # torch leaves a dim that is not 1 alone; ONNX Squeeze refuses it.
    keep = [axis(d, r) for d in dims if not (isinstance(shape[axis(d, r)], int) and shape[axis(d, r)] != 1)]
    if any(not isinstance(shape[d], int) for d in keep):
        unsupported(w, "squeezing a dim of symbolic size")
    if not keep:
        return w.emit("Identity", [w.value(x)])
    return w.emit("Squeeze", [w.value(x), w.const(keep, torch.int64)])


@row(aten.slice.Tensor, aten.slice_copy.Tensor)
def _slice(w, node, x, dim=0, start=None, end=None, step=1):
    start = 0 if start is None else start
    if start == 0 and step == 1 and (end is None or (isinstance(end, int) and end >= INT64_MAX)):
        return w.value(x)  # x[:, :, None] writes full slices: the identity, and clamps the prover need not see
    end = INT64_MAX if end is None else min(end, INT64_MAX) if isinstance(end, int) else end
    return w.emit("Slice", [w.value(x), w.ints([start]), w.ints([end]),
                            w.const([axis(dim, rank_of(x))], torch.int64), w.ints([step])])


@row(aten.select.int, aten.select_copy.int)
def _select(w, node, x, dim, index):
    return w.emit("Gather", [w.value(x), w.scalar(index)], axis=axis(dim, rank_of(x)))


@row(aten.cat.default)
def _cat(w, node, tensors, dim=0):
    parts = [w.value(t) for t in tensors]
    return w.emit("Concat", parts, axis=axis(dim, rank_of(node)))


@row(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def _split_with_sizes(w, node, x, sizes, dim=0):
    return w.emit("Split", [w.value(x), w.ints(sizes)], n_out=len(sizes), axis=axis(dim, rank_of(x))) \
        if len(sizes) > 1 else [w.emit("Identity", [w.value(x)])]


@row(aten.split.Tensor, aten.split_copy.Tensor)
def _split(w, node, x, size, dim=0):
    d = axis(dim, rank_of(x))
    return _split_with_sizes(w, node, x, [o.shape[d] for o in out_val(node)], d)


@row(aten.unbind.int)
def _unbind(w, node, x, dim=0):
    d = axis(dim, rank_of(x))
    parts = _split_with_sizes(w, node, x, [1] * len(out_val(node)), d)
    return [w.emit("Squeeze", [p, w.const([d], torch.int64)]) for p in parts]


# --- creation -------------------------------------------------------------------

@row(aten.full.default)
def _full(w, node, size, value, **kw):
    return w.filled(size, value, out_val(node).dtype)


@row(aten.zeros.default, aten.ones.default)
def _zeros_ones(w, node, size, **kw):
    return _full(w, node, size, 0 if node.target is aten.zeros.default else 1)


@row(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full_like(w, node, x, *args, **kw):
    value = {aten.zeros_like.default: 0, aten.ones_like.default: 1}.get(node.target)
    return w.filled(list(out_val(node).shape), args[0] if value is None else value, out_val(node).dtype)


@row(aten.scalar_tensor.default)
def _scalar_tensor(w, node, value, **kw):
    return operand(w, value, out_val(node).dtype)


@row(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(w, node, *args, **kw):
    args = list(args)
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args + [1])[:3]
    dt = out_val(node).dtype
    scalar = lambda v: operand(w, v, dt) if not isinstance(v, torch.fx.Node) else w.cast(w.value(v), dt)  # noqa: E731
    return w.emit("Range", [scalar(start), scalar(end), scalar(step)])


@row(aten.triu.default, aten.tril.default)
def _trilu(w, node, x, diagonal=0):
    return w.emit("Trilu", [w.value(x), w.scalar(diagonal)], upper=int(node.target is aten.triu.default))


# --- linear algebra, normalization, reductions ----------------------------------

@row(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _matmul(w, node, a, b):
    return w.emit("MatMul", [w.value(a), w.value(b)])


@row(aten.linear.default)
def _linear(w, node, x, weight, bias=None):
    y = w.emit("MatMul", [w.value(x), w.emit("Transpose", [w.value(weight)], perm=[1, 0])])
    return y if bias is None else w.emit("Add", [y, w.value(bias)])


@row(aten.addmm.default)
def _addmm(w, node, bias, a, b, beta=1, alpha=1):
    dt = out_val(node).dtype
    prod = w.emit("MatMul", [w.value(a), w.value(b)])
    if alpha != 1:
        prod = w.emit("Mul", [prod, w.const(alpha, dt)])
    c = w.value(bias)
    if beta != 1:
        c = w.emit("Mul", [c, w.const(beta, dt)])
    return w.emit("Add", [prod, c])


@row(aten.native_layer_norm.default)
def _layer_norm(w, node, x, shape, weight, bias, eps):
    n = len(shape)
    dt = out_val(node, 0).dtype
    if weight is None:
        weight_v = w.filled(list(shape), 1, dt)
    else:
        weight_v = w.value(weight)
    ins = [w.value(x), weight_v] + ([w.value(bias)] if bias is not None else [])
    return w.emit("LayerNormalization", ins, n_out=3, axis=-n, epsilon=float(eps))


@row(aten._softmax.default)
def _softmax(w, node, x, dim, half_to_float=False):
    return w.emit("Softmax", [w.value(x)], axis=axis(dim, rank_of(x)))


@row(aten._log_softmax.default)
def _log_softmax(w, node, x, dim, half_to_float=False):
    return w.emit("LogSoftmax", [w.value(x)], axis=axis(dim, rank_of(x)))


def _axes(x, dims):
    r = rank_of(x)
    return list(range(r)) if dims is None or len(dims) == 0 else [axis(d, r) for d in dims]


@row(aten.sum.dim_IntList, aten.sum.default)
def _sum(w, node, x, dims=None, keepdim=False, dtype=None):
    return w.emit("ReduceSum", [w.value(x), w.const(_axes(x, dims), torch.int64)], keepdims=int(keepdim))


@row(aten.mean.dim, aten.mean.default)
def _mean(w, node, x, dims=None, keepdim=False, dtype=None):
    return w.emit("ReduceMean", [w.value(x)], axes=_axes(x, dims), keepdims=int(keepdim))


@row(aten.amax.default, aten.amin.default)
def _amax(w, node, x, dims=(), keepdim=False):
    op = "ReduceMax" if node.target is aten.amax.default else "ReduceMin"
    return w.emit(op, [w.value(x)], axes=_axes(x, dims), keepdims=int(keepdim))


@row(aten.cumsum.default)
def _cumsum(w, node, x, dim, dtype=None):
    return w.emit("CumSum", [w.value(x), w.const(axis(dim, rank_of(x)), torch.int64)])


# --- lookups ---------------------------------------------------------------------

@row(aten.embedding.default)
def _embedding(w, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return w.emit("Gather", [w.value(weight), w.value(indices)], axis=0)


@row(aten.gather.default)
def _gather(w, node, x, dim, index, sparse_grad=False):
    return w.emit("GatherElements", [w.value(x), w.value(index)], axis=axis(dim, rank_of(x)))


@row(aten.index.Tensor)
def _index(w, node, x, indices):
    if len(indices) != 1 or indices[0] is None:
        unsupported(w, "advanced indexing with more than one index tensor")
    if out_val(indices[0]).dtype == torch.bool:
        unsupported(w, "indexing with a boolean mask")
    return w.emit("Gather", [w.value(x), w.value(indices[0])], axis=0)


# --- collectives ------------------------------------------------------------------

def _group(w, name):
    """(group_size, group_ranks) of a functional collective's group."""
    ranks = ranks_of(name)
    return len(ranks), ranks


def _collective(w, op, v, name, domain, attrs=None):
    size, ranks = _group(w, name)
    return w.emit(op, [v], domain=domain, group_size=size, group_ranks=ranks, **(attrs or {}))


@row(c10d.all_reduce.default)
def _all_reduce(w, node, x, op, group):
    if op not in ("sum", "max", "min"):
        unsupported(w, f"all_reduce with op {op.upper()} (SUM, MAX and MIN are supported)")
    v = w.value(x)
    if v not in w.reshaped:
        return _collective(w, "AllReduce", v, group, *_reduce_kind(op))
    # Elementwise across ranks of equal shapes: reducing the view's source
    # and viewing the result is the same tensor, and keeps the view foldable.
    base, base_shape = w.reshaped[v]
    reduced = _collective(w, "AllReduce", base, group, *_reduce_kind(op))
    out = w.emit("Reshape", [reduced, w.ints(list(out_val(x).shape))])
    w.reshaped[out] = (reduced, base_shape)
    return out


def _reduce_kind(op):
    return ("com.microsoft", {}) if op == "sum" else ("shardproof", {"op": op})


@row(c10d.all_gather_into_tensor.default)
def _all_gather(w, node, x, group_size, group):
    return _collective(w, "AllGather", w.value(x), group, "com.microsoft", {"axis": 0})


@row(c10d.reduce_scatter_tensor.default)
def _reduce_scatter(w, node, x, op, group_size, group):
    if op != "sum":
        unsupported(w, f"reduce_scatter with op {op.upper()} (SUM is supported)")
    return _collective(w, "ReduceScatter", w.value(x), group, "shardproof", {"axis": 0})


@row(c10d.all_to_all_single.default)
def _all_to_all(w, node, x, output_splits, input_splits, group):
    if output_splits is not None or input_splits is not None:
        if len(set(map(str, output_splits or []))) > 1 or len(set(map(str, input_splits or []))) > 1:
            unsupported(w, "all_to_all_single with unequal splits")
    return _collective(w, "AllToAll", w.value(x), group, "shardproof", {"split_axis": 0, "concat_axis": 0})


@row(c10d.wait_tensor.default)
def _wait(w, node, x):
    return w.value(x)


# --- no-ops and writes -----------------------------------------------------------

@row(aten._assert_tensor_metadata.default)
def _assert_metadata(w, node, *args, **kw):
    return None  # a dtype/device check torch made while tracing: nothing to compute


@row(aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default, aten.empty_permuted.default)
def _empty(w, node, size, *args, **kw):
    """Uninitialized memory: NaN, so that any read of it poisons what it
    reaches instead of reading as a value (a buffer a collective or a copy
    overwrites whole is never read)."""
    if node.target is aten.empty_like.default:
        size = list(out_val(node).shape)
    dt = out_val(node).dtype
    if not dt.is_floating_point:
        unsupported(w, f"an uninitialized {dt} tensor (torch.empty) that is read")
    return w.filled(size, float("nan"), dt)


@row(aten.index_put.default)
def _index_put(w, node, x, indices, values, accumulate=False):
    """x[mask] = v with one boolean mask over x's leading dims (Megatron's
    vocab-parallel embedding zeroing the rows of ids outside its shard), or
    x[ids] += v with one integer index tensor (an embedding's backward)."""
    if accumulate and len(indices) == 1 and indices[0] is not None and out_val(indices[0]).dtype != torch.bool:
        return _scatter.accumulate_rows(w, node, x, indices[0], values)
    if accumulate or len(indices) != 1 or indices[0] is None or out_val(indices[0]).dtype != torch.bool:
        unsupported(w, "index_put other than x[mask] = value with one boolean mask, or x[ids] += values")
    mask, r = indices[0], rank_of(x)
    m = w.value(mask)
    extra = r - rank_of(mask)
    if extra:
        m = w.emit("Unsqueeze", [m, w.const(list(range(rank_of(mask), r)), torch.int64)])
    if out_val(values).dim() != 0 and out_val(values).numel() != 1:
        unsupported(w, "index_put of a tensor of values (only one value broadcast over the mask)")
    v = w.value(values)
    if out_val(values).dim() != 0:
        v = w.emit("Reshape", [v, w.const([], torch.int64)])
    return w.emit("Where", [m, v, w.value(x)])


@row(aten.max.dim, aten.min.dim)
def _max_dim(w, node, x, dim, keepdim=False):
    big = node.target is aten.max.dim
    a, k = axis(dim, rank_of(x)), int(keepdim)
    values = w.emit("ReduceMax" if big else "ReduceMin", [w.value(x)], axes=[a], keepdims=k)
    indices = w.emit("ArgMax" if big else "ArgMin", [w.value(x)], axis=a, keepdims=k)
    return [values, indices]


@row(aten.max.default, aten.min.default)
def _max_all(w, node, x):
    op = "ReduceMax" if node.target is aten.max.default else "ReduceMin"
    return w.emit(op, [w.value(x)], axes=list(range(rank_of(x))), keepdims=0)


# The backward's scatters and softmax gradients (their rows register in ROWS;
# index_put calls one).
from . import _scatter, _softmax_grad  # noqa: E402,F401
