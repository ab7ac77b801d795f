"""Backward rules the tracer can record, for the ops whose own backward it cannot.

torch.onnx.export's tracer records the backward pass of a forward that calls
`torch.autograd.grad(..., create_graph=True)`, with three gaps (in torch 1.13,
and in 2.13's dynamo=False exporter except silu's backward, which exports):
- an op that saves its *output* for backward (tanh, sigmoid, exp, rsqrt, sqrt,
  relu, softmax, log_softmax) fails with "Cannot insert a Tensor that requires
  grad as a constant": the unpacked output is a tensor the trace never saw;
- layer_norm's backward takes an argument the tracer cannot record
  ("unsupported argument type");
- linear and matmul of a 3-d input that requires grad fold it into a view
  the tracer never saw, and fail the same way;
- gelu and silu record `aten::gelu_backward` / `aten::silu_backward`, which
  have no ONNX export.
While a training step is exported, each of these functions is replaced (on
torch, torch.nn.functional and Tensor) by an autograd Function that saves its
input and writes the derivative in forward ops, which the tracer records and
ONNX exports as ordinary nodes. Forward values are unchanged: the Function's
forward calls the original.
"""
import contextlib
import math

import torch
import torch.nn.functional as F

_ORIGINAL = {}  # name -> the original function, filled by replaced()


def _orig(name):
    return _ORIGINAL[name]


class _Pointwise(torch.autograd.Function):
    """y = f(x) with f' written in forward ops; subclasses set NAME and derivative()."""
    NAME = ""

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return _orig(cls.NAME)(x)

    @classmethod
    def backward(cls, ctx, g):
        x, = ctx.saved_tensors
        return g * cls.derivative(x)


class _Tanh(_Pointwise):
    NAME = "tanh"

    @staticmethod
    def derivative(x):
        t = _orig("tanh")(x)
        return 1 - t * t


class _Sigmoid(_Pointwise):
    NAME = "sigmoid"

    @staticmethod
    def derivative(x):
        s = _orig("sigmoid")(x)
        return s * (1 - s)


class _Exp(_Pointwise):
    NAME = "exp"

    @staticmethod
    def derivative(x):
        return _orig("exp")(x)


class _Rsqrt(_Pointwise):
    NAME = "rsqrt"

    @staticmethod
    def derivative(x):
        r = _orig("rsqrt")(x)
        return -0.5 * r * r * r


class _Sqrt(_Pointwise):
    NAME = "sqrt"

    @staticmethod
    def derivative(x):
        return 0.5 / _orig("sqrt")(x)


class _Relu(_Pointwise):
    NAME = "relu"

    @staticmethod
    def derivative(x):
        return (x > 0).to(x.dtype)


class _Silu(_Pointwise):
    NAME = "silu"

    @staticmethod
    def derivative(x):
        s = _orig("sigmoid")(x)
        return s * (1 + x * (1 - s))


class _Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return _orig("gelu")(x, approximate=approximate)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        if ctx.approximate == "tanh":
            k = math.sqrt(2 / math.pi)
            inner = k * (x + 0.044715 * x * x * x)
            t = _orig("tanh")(inner)
            d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
        else:
            cdf = 0.5 * (1 + torch.erf(x * (1 / math.sqrt(2))))
            pdf = _orig("exp")(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
            d = cdf + x * pdf
        return g * d, None


class _AlongDim(torch.autograd.Function):
    """y = f(x, dim) with its vector-Jacobian product written in forward ops."""
    NAME = ""

    @classmethod
    def forward(cls, ctx, x, dim):
        ctx.save_for_backward(x)
        ctx.dim = dim
        return _orig(cls.NAME)(x, dim)

    @classmethod
    def backward(cls, ctx, g):
        x, = ctx.saved_tensors
        return cls.grad_input(g, _orig("softmax")(x, ctx.dim), ctx.dim), None


class _Softmax(_AlongDim):
    NAME = "softmax"

    @staticmethod
    def grad_input(g, y, dim):
        return y * (g - (g * y).sum(dim, keepdim=True))


class _LogSoftmax(_AlongDim):
    NAME = "log_softmax"

    @staticmethod
    def grad_input(g, softmax, dim):
        return g - softmax * g.sum(dim, keepdim=True)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shape, weight, bias, eps):
        ctx.save_for_backward(x, weight, bias)
        ctx.shape, ctx.eps = shape, eps
        return _orig("layer_norm")(x, shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, g):
        x, weight, bias = ctx.saved_tensors
        axes = tuple(range(x.dim() - len(ctx.shape), x.dim()))
        lead = tuple(range(x.dim() - len(ctx.shape)))
        mean = x.mean(axes, keepdim=True)
        xc = x - mean
        rstd = _orig("rsqrt")((xc * xc).mean(axes, keepdim=True) + ctx.eps)
        xhat = xc * rstd
        gxhat = g * weight if weight is not None else g
        gx = rstd * (gxhat - gxhat.mean(axes, keepdim=True) - xhat * (gxhat * xhat).mean(axes, keepdim=True))
        gw = (g * xhat).sum(lead) if weight is not None and ctx.needs_input_grad[2] else None
        gb = g.sum(lead) if bias is not None and ctx.needs_input_grad[3] else None
        return gx, None, gw, gb, None


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight, bias)
        return _orig("linear")(x, weight, bias)

    @staticmethod
    def backward(ctx, g):
        x, weight, bias = ctx.saved_tensors
        gx = g.matmul(weight) if ctx.needs_input_grad[0] else None
        # The weight's gradient sums over every leading axis (batch, sequence):
        # the last one by the matmul, the others by a sum, with no reshape
        # (flattening [seq, batch] would turn every index into div/mod).
        gw = None
        if ctx.needs_input_grad[1]:
            gw = g.transpose(-1, -2).matmul(x) if g.dim() > 1 else g.unsqueeze(-1) * x.unsqueeze(0)
            if gw.dim() > 2:
                gw = gw.sum(tuple(range(gw.dim() - 2)))
        lead = tuple(range(g.dim() - 1))
        gb = (g.sum(lead) if lead else g) if bias is not None and ctx.needs_input_grad[2] else None
        return gx, gw, gb


def _sum_to(g, shape):
    """g summed over the axes broadcasting added or stretched, to `shape`."""
    while g.dim() > len(shape):
        g = g.sum(0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis, keepdim=True)
    return g


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _orig("matmul")(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if a.dim() < 2 or b.dim() < 2:
            raise TypeError("matmul of a 1-d tensor has no backward rule while exporting a training step")
        ga = _sum_to(_orig("matmul")(g, b.transpose(-1, -2)), a.shape) if ctx.needs_input_grad[0] else None
        gb = _sum_to(_orig("matmul")(a.transpose(-1, -2), g), b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb


def _matmul(a, b):
    return _Matmul.apply(a, b)


def _linear(x, weight, bias=None):
    return _Linear.apply(x, weight, bias)


def _one_hot(index, n, dtype):
    """[..., n] with 1 where the last axis position equals index (traced as Equal and Cast)."""
    positions = torch.arange(n, device=index.device)
    return (index.unsqueeze(-1) == positions).to(dtype)


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weight, padding_idx):
        ctx.save_for_backward(ids, weight)
        ctx.padding_idx = padding_idx
        return _orig("embedding")(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx, g):
        ids, weight = ctx.saved_tensors
        # Row v of the table gets the sum of the gradients at the positions
        # whose id is v: a one-hot of the ids, contracted with g over positions.
        hot = _one_hot(ids, weight.shape[0], g.dtype)               # [..., V]
        if ctx.padding_idx is not None:  # torch leaves the padding row's gradient 0
            pad = ctx.padding_idx + weight.shape[0] if ctx.padding_idx < 0 else ctx.padding_idx
            hot = hot * (torch.arange(weight.shape[0]) != pad).to(g.dtype)
        gw = _orig("matmul")(hot.unsqueeze(-1), g.unsqueeze(-2))    # [..., V, D]
        return None, gw.sum(tuple(range(gw.dim() - 2))), None


def _embedding(ids, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise TypeError("embedding with max_norm, scale_grad_by_freq or sparse has no backward rule yet")
    return _Embedding.apply(ids, weight, padding_idx)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.save_for_backward(x, index)
        ctx.dim = dim
        return _orig("gather")(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        x, index = ctx.saved_tensors
        dim = ctx.dim if ctx.dim >= 0 else ctx.dim + x.dim()
        if dim != x.dim() - 1:
            raise TypeError("gather on an axis other than the last has no backward rule yet")
        # Element j of the input gets the gradients of every k with index[k] == j.
        hot = _one_hot(index, x.shape[-1], g.dtype)                 # [..., K, n]
        return (hot * g.unsqueeze(-1)).sum(-2), None, None


def _gather(x, dim, index, *, sparse_grad=False):
    return _Gather.apply(x, dim, index)


def _dim_arg(fn_name, dim, args):
    if dim is None and args:
        dim = args[0]
    if dim is None:
        raise TypeError(f"{fn_name}() without dim is not supported while exporting a training step")
    return dim


def _softmax(x, dim=None, *args, dtype=None, **kwargs):
    dim = _dim_arg("softmax", dim, ())
    return _Softmax.apply(x if dtype is None else x.to(dtype), dim)


def _log_softmax(x, dim=None, *args, dtype=None, **kwargs):
    dim = _dim_arg("log_softmax", dim, ())
    return _LogSoftmax.apply(x if dtype is None else x.to(dtype), dim)


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return _LayerNorm.apply(x, shape, weight, bias, eps)


def _gelu(x, approximate="none"):
    return _Gelu.apply(x, approximate)


def _relu(x, inplace=False):
    return _Relu.apply(x)


# (name, replacement, [(namespace, attribute)...]); _ORIGINAL[name] is the
# function found at the first place.
_RULES = [
    ("tanh", _Tanh.apply, [(torch, "tanh"), (torch.Tensor, "tanh"), (F, "tanh")]),
    ("sigmoid", _Sigmoid.apply, [(torch, "sigmoid"), (torch.Tensor, "sigmoid"), (F, "sigmoid")]),
    ("exp", _Exp.apply, [(torch, "exp"), (torch.Tensor, "exp")]),
    ("rsqrt", _Rsqrt.apply, [(torch, "rsqrt"), (torch.Tensor, "rsqrt")]),
    ("sqrt", _Sqrt.apply, [(torch, "sqrt"), (torch.Tensor, "sqrt")]),
    ("relu", _relu, [(torch, "relu"), (torch.Tensor, "relu"), (F, "relu")]),
    ("silu", lambda x, inplace=False: _Silu.apply(x), [(F, "silu")]),
    ("gelu", _gelu, [(F, "gelu")]),
    ("softmax", _softmax, [(torch.Tensor, "softmax"), (F, "softmax"), (torch, "softmax")]),
    ("log_softmax", _log_softmax, [(torch.Tensor, "log_softmax"), (F, "log_softmax"), (torch, "log_softmax")]),
    ("layer_norm", _layer_norm, [(F, "layer_norm")]),
    ("linear", _linear, [(F, "linear")]),
    ("embedding", _embedding, [(F, "embedding")]),
    ("gather", _gather, [(torch, "gather"), (torch.Tensor, "gather")]),
    ("matmul", _matmul, [(torch, "matmul"), (torch.Tensor, "matmul"), (torch.Tensor, "__matmul__")]),
]


@contextlib.contextmanager
def replaced():
    """The functions above replaced by their traceable-backward versions."""
    saved = []
    try:
        for name, fn, places in _RULES:
            _ORIGINAL.setdefault(name, getattr(places[0][0], places[0][1]))
            for namespace, attr in places:
                saved.append((namespace, attr, getattr(namespace, attr)))
                setattr(namespace, attr, fn)
        yield
    finally:
        for namespace, attr, fn in reversed(saved):
            setattr(namespace, attr, fn)


GRAD_PREFIX = "grad:"


def parameter_names(module):
    return [n for n, p in module.named_parameters() if p.requires_grad]


def train_step(module, what, error, finalize=None):
    """Makes module(*inputs) return (loss, grad of every parameter): its
    forward must return the scalar loss. `finalize(module)`, if given, runs
    after the backward pass with every parameter's .grad set, as after
    loss.backward(), and may synchronize them (all-reduce in place, or assign
    new .grad tensors), as Megatron's finalize_model_grads does. `error`
    builds the exception raised for a module that cannot be differentiated."""
    forward = module.forward
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    if not named:
        raise error(f"--train: the {what} has no parameters that require a gradient")

    def step(*args, **kwargs):
        loss = forward(*args, **kwargs)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            shape = list(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise error(f"--train: the {what}'s forward must return the scalar loss, it returned {shape} "
                        "(reduce it to the loss in forward, e.g. with a loss function)")
        grads = torch.autograd.grad(loss, [p for _, p in named], create_graph=True, allow_unused=True)
        # A parameter the loss does not depend on has gradient zero.
        grads = [torch.zeros_like(p) if g is None else g for (_, p), g in zip(named, grads)]
        if finalize is not None:
            for (_, p), g in zip(named, grads):
                p.grad = g
            try:
                finalize(module)
                grads = [p.grad for _, p in named]
            finally:
                for _, p in named:
                    p.grad = None
            for (n, _), g in zip(named, grads):
                if not isinstance(g, torch.Tensor):
                    raise error(f"--train: finalize_grads left no gradient for '{n}' of the {what}")
        return (loss,) + tuple(grads)

    module.forward = step
    return ["loss"] + [GRAD_PREFIX + n for n, _ in named]


# --- Backward ops the tracer records fine but ONNX cannot export -------------
# aten::slice_backward / select_backward put the gradient of a slice (x[..., :h])
# or of an index (x[0]) back into zeros of the input's shape: a Pad.

def _sizes_of(g, input_sizes, rank):
    """input_sizes (a list of ints or of traced sizes) as a 1-D int64 tensor."""
    from torch.onnx import symbolic_helper as sh
    if sh._is_packed_list(input_sizes):
        parts = [sh._reshape_helper(g, s, g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64)))
                 for s in sh._unpack_list(input_sizes)]
        return g.op("Concat", *parts, axis_i=0)
    return g.op("Cast", input_sizes, to_i=7)  # INT64


def _pad_into(g, grad, input_sizes, dim, before, end):
    """Pad grad with zeros on `dim`: `before` in front, up to input_sizes[dim]
    (or to `end` first) behind."""
    from torch.onnx import symbolic_helper as sh
    rank = sh._get_tensor_rank(grad)
    if rank is None:
        raise TypeError("slice_backward of a tensor of unknown rank")
    dim = dim + rank if dim < 0 else dim

    def const(v):
        return g.op("Constant", value_t=torch.tensor(v, dtype=torch.int64))
    sizes = _sizes_of(g, input_sizes, rank)
    size = g.op("Gather", sizes, const([dim]), axis_i=0)
    # x[..., h:] ends at INT64_MAX, "to the end": no Min, which would read as a
    # bound on the size itself.
    stop = g.op("Min", size, const([end])) if end is not None and end < (1 << 62) else size
    after = g.op("Sub", size, stop)
    pads = [const([0] * dim + [before] + [0] * (rank - 1 - dim) + [0] * dim)]
    pads += [after, const([0] * (rank - 1 - dim))]
    return g.op("Pad", grad, g.op("Concat", *pads, axis_i=0), mode_s="constant")


def _slice_backward(g, grad, input_sizes, dim, start, end, step):
    from torch.onnx import symbolic_helper as sh
    dim, start, end, step = (sh._get_const(v, "i", n) for v, n in
                             ((dim, "dim"), (start, "start"), (end, "end"), (step, "step")))
    if step != 1 or start < 0 or end < 0:
        raise TypeError(f"slice_backward with step {step}, start {start}, end {end} has no rule yet "
                        "(steps of 1 and non-negative bounds have)")
    return _pad_into(g, grad, input_sizes, dim, start, end)


def _select_backward(g, grad, input_sizes, dim, index):
    from torch.onnx import symbolic_helper as sh
    dim, index = sh._get_const(dim, "i", "dim"), sh._get_const(index, "i", "index")
    if index < 0:
        raise TypeError(f"select_backward at a negative index ({index}) has no rule yet")
    rank = (sh._get_tensor_rank(grad) or 0) + 1
    axis = dim + rank if dim < 0 else dim
    unsq = g.op("Unsqueeze", grad, g.op("Constant", value_t=torch.tensor([axis], dtype=torch.int64)))
    return _pad_into(g, unsq, input_sizes, axis, index, index + 1)


def _squeeze(g, self, dim=None):
    """squeeze(dim) of a dim whose size the exporter cannot see: torch emits an
    If (squeeze when the size is 1, else nothing), which the prover cannot
    read; the backward of x[:, None] squeezes a dim that is always 1. Emitted
    as Squeeze, whose size-1 obligation the prover checks at every size, so a
    dim that is not 1 is reported, never assumed."""
    from torch.onnx import symbolic_helper as sh, symbolic_opset11
    if dim is None or not sh._is_constant(dim):
        return symbolic_opset11.squeeze(g, self, dim)
    d = sh._get_const(dim, "i", "dim")
    rank = sh._get_tensor_rank(self)
    if rank is not None and sh._get_tensor_dim_size(self, d + rank if d < 0 else d) is not None:
        return symbolic_opset11.squeeze(g, self, dim)
    return g.op("Squeeze", self, g.op("Constant", value_t=torch.tensor([d], dtype=torch.int64)))


_SYMBOLICS = [("aten::slice_backward", _slice_backward), ("aten::select_backward", _select_backward),
              ("aten::squeeze", _squeeze)]


@contextlib.contextmanager
def backward_symbolics(opset):
    """The symbolics above registered for the duration (torch's own return after)."""
    from torch.onnx import register_custom_op_symbolic, unregister_custom_op_symbolic
    for name, fn in _SYMBOLICS:
        register_custom_op_symbolic(name, fn, opset)
    try:
        yield
    finally:
        for name, _ in _SYMBOLICS:
            unregister_custom_op_symbolic(name, opset)
