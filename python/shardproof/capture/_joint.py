"""A training step traced with make_fx: the user's forward, torch's own
backward, and the user's gradient synchronization, as one functional graph.

The step runs on fake tensors whose dynamic sizes are symbols (at least 2,
one symbol per size name) under python functionalization, so every alias is
exact, as in the forward capture. Autograd runs the program's own backward:
torch's derivative of each ATen op and the `backward` of the program's
autograd Functions (Megatron's f and g), with the collective interception
re-entered there, because the autograd engine runs backward without the
forward's function modes. The graph outputs the loss, then `grad:<param>` for
every parameter that requires a gradient. The forward of a module with
DTensor parameters, which torch.export cannot take, is traced here too,
without the backward.
"""
import contextlib
import warnings

import torch
from torch.autograd.function import BackwardCFunction
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StrictMinMaxConstraint
from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks_from_tensors
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from ._intercept import Intercept
from ._onnx import spec_text
from ._refold import refold_matmuls
from ._trace import MIN_SIZE, Traced, _decompositions, check_example_sizes, range_conditions, traced_error
from ._world import CaptureError

GRAD_PREFIX = "grad:"


def output_names(module):
    return ["loss"] + [GRAD_PREFIX + n for n, p in module.named_parameters() if p.requires_grad]


@contextlib.contextmanager
def _backward_under(mode):
    """The autograd Functions' backward run under `mode` too."""
    apply = BackwardCFunction.apply

    def patched(self, *args):
        if mode in torch.overrides._get_current_function_mode_stack():
            return apply(self, *args)
        with mode:
            return apply(self, *args)

    BackwardCFunction.apply = patched
    try:
        yield
    finally:
        BackwardCFunction.apply = apply


class _Sizes:
    """One symbol per size name, at least MIN_SIZE, in a fresh shape env."""

    def __init__(self, example):
        from torch._dynamo.source import ConstantSource

        self.env = ShapeEnv()
        self.fake = FakeTensorMode(shape_env=self.env, allow_non_fake_inputs=False)
        self.sym = {}
        for name, value in example.items():
            source = ConstantSource(f"size_{name}")
            expr = self.env.create_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC,
                                          constraint_dim=StrictMinMaxConstraint(warn_only=False,
                                                                                vr=ValueRanges(MIN_SIZE, int_oo)))
            self.sym[name] = self.env.create_symintnode(expr, hint=value, source=source)
        self.names = {v.node.expr: k for k, v in self.sym.items()}

    def tensor(self, t, axes):
        """A fake of `t` with axis -> size name `axes` symbolic."""
        if not axes:
            return self.fake.from_tensor(t.contiguous(), static_shapes=True)
        shape = list(t.shape)
        for axis, name in axes.items():
            shape[axis] = self.sym[name]
        with self.fake:
            return torch.empty(shape, dtype=t.dtype)

    def guards(self):
        """What the trace assumed about the sizes, as spec conditions."""
        out = [spec_text(g.expr, self.names, lambda: "the training step") for g in self.env.guards]
        return out + range_conditions(self.names, self.env.var_to_range)


def _functional(what, fn, named, originals):
    """fn under python functionalization; an input written in place is an
    error (the graph would lose the write). `named` labels fn's inputs, and
    each keeps the attributes the program set on the original tensor (such
    as Megatron's `sequence_parallel` flag on a parameter)."""
    def inner(*args):
        mode = FunctionalTensorMode()
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)), mode:
            wrapped = [[FunctionalTensor.to_functional(t) for t in group] for group in args]
            for group, before in zip(wrapped, originals):
                for t, o in zip(group, before):
                    t.__dict__.update({k: v for k, v in vars(o).items() if not k.startswith("__")})
            out = fn(*wrapped)
            for group, labels in zip(wrapped, named):
                for t, (kind, name) in zip(group, labels):
                    torch._sync(t)
                    if torch._functionalize_has_data_mutation(t.elem):
                        raise CaptureError(_mutation_message(what, kind, name))
            results = []
            for t in out:
                torch._sync(t)
                results.append(torch._from_functional_tensor(t.elem))
            return results
    return inner


def _mutation_message(what, kind, name):
    if kind == "input":
        return (f"the {what} writes its input '{name}' in place: shardproof compares pure functions of the inputs; "
                "return the new value instead")
    return (f"the {what} writes its {kind} '{name}' during the step (a cache, or running statistics?): shardproof "
            "compares pure functions of the inputs; build the module without it or pass it as an input")


def _example_sizes(inputs, dynamic):
    """Each size name's value in the example inputs (the same everywhere)."""
    out = {}
    for n, axes in dynamic.items():
        for axis, name in axes.items():  # each axis checked by check_example_sizes
            t = inputs[n]
            if out.setdefault(name, t.shape[axis]) != t.shape[axis]:
                raise CaptureError(f"size '{name}' is {out[name]} in one example input and {t.shape[axis]} in "
                                   f"'{n}' (axis {axis}): one size name, one value")
    return out


def trace_step(what, module, inputs, dynamic, finalize=None, forward=False):
    """The training step of `module` (its forward returns the scalar loss) fed
    with `inputs`; `dynamic` maps an input name to {axis: size name}.
    `finalize(module)` runs after the backward pass with every parameter's
    .grad set and may synchronize them, as a training loop does before the
    optimizer step. With `forward`, only the forward and its outputs (the
    route for DTensor parameters, which torch.export cannot take)."""
    check_example_sizes(inputs, dynamic)
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad or forward]
    if not params and not forward:
        raise CaptureError(f"the {what} has no parameters that require a gradient: there is no training step")
    state = [(n, p) for n, p in module.named_parameters() if not (p.requires_grad or forward)]
    state += list(module.named_buffers())
    sz = _Sizes(_example_sizes(inputs, dynamic))
    names = list(inputs)
    fakes = ([sz.fake.from_tensor(_local(p).detach(), static_shapes=True) for _, p in params],
             [sz.fake.from_tensor(t.detach(), static_shapes=True) for _, t in state],
             [sz.tensor(inputs[n], dynamic.get(n, {})) for n in names])
    labels = ([("parameter", n) for n, _ in params], [("buffer", n) for n, _ in state],
              [("input", n) for n in names])
    mode = Intercept()
    layouts, state_names = [(n, _layout(p)) for n, p in params], [n for n, _ in state]
    step = (_forward(module, layouts, state_names, mode) if forward else
            _step(what, module, layouts, state_names, mode, finalize,
                  lambda d: d if isinstance(d, int) else sz.names.get(d.node.expr, str(d))))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn = _functional(what, step, labels, ([p for _, p in params], [t for _, t in state], []))
            fn._orig_mod = module  # make_fx records module paths under this root
            with torch.fx.traceback.preserve_node_meta():
                gm = make_fx(fn, decomposition_table=_decompositions(), tracing_mode="symbolic",
                             record_module_stack=True, record_stack_traces=True)(*fakes)
    except CaptureError:
        raise
    except Exception as e:  # torch's refusal, or the user's code failing under tracing
        raise traced_error(what if forward else f"{what}'s training step", e, names) from e
    unwaited = mode.unwaited()
    if unwaited:
        raise CaptureError(f"the {what} never waits for {unwaited[0].describe()}: its result is never written")
    _locate_backward(gm)
    refold_matmuls(gm)
    phs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    graph_inputs = [n for group in labels for _, n in group]
    n_outputs = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])
    return Traced(gm, dict(zip(phs, graph_inputs)), dict(sz.names), n_outputs, mode.calls, sz.guards())


def _local(p):
    """A DTensor parameter's shard on this rank (what the rank's graph reads)."""
    from torch.distributed.tensor import DTensor

    return p.to_local() if isinstance(p, DTensor) else p


def _layout(p):
    from torch.distributed.tensor import DTensor

    return (p.device_mesh, p.placements, p.shape, p.stride()) if isinstance(p, DTensor) else None


def _distributed(local, layout):
    """The parameter the module sees: the traced shard, wrapped back into its
    DTensor (differentiably, so the gradient is the shard's own)."""
    if layout is None:
        return local
    from torch.distributed.tensor import DTensor

    mesh, placements, shape, stride = layout
    return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape, stride=stride)


def _locate_backward(gm):
    """Each backward node gets the user's line of the forward node it
    differentiates (autograd's sequence number ties them)."""
    forward = {}
    for n in gm.graph.nodes:
        if not n.meta.get("autograd_backward") and n.meta.get("stack_trace"):
            forward.setdefault(n.meta.get("seq_nr"), n.meta["stack_trace"])
    for n in gm.graph.nodes:
        if n.meta.get("autograd_backward") and n.meta.get("seq_nr") in forward:
            n.meta["stack_trace"] = forward[n.meta["seq_nr"]]


def _step(what, module, param_names, state_names, mode, finalize, size_name=str):
    from torch.nn.utils.stateless import _reparametrize_module

    def step(params, state, args):
        params = [p.requires_grad_(True) for p in params]
        tensors = {n: _distributed(p, layout) for (n, layout), p in zip(param_names, params)}
        tensors.update(zip(state_names, state))
        with mode, _backward_under(mode), _reparametrize_module(module, tensors):
            loss = module(*args)
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                got = ("[" + ", ".join(str(size_name(d)) for d in loss.shape) + "]" if isinstance(loss, torch.Tensor)
                       else type(loss).__name__)
                raise CaptureError(f"the {what}'s forward must return the scalar loss for a training step, it "
                                   f"returned {got} (reduce it to the loss in forward, e.g. with a loss function)")
            # Backward nodes then carry the sequence number of the forward node
            # they differentiate (read by _locate_backward).
            setup_stacktrace_preservation_hooks_from_tensors(loss)
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            # A parameter the loss does not depend on has gradient zero.
            grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
            if finalize is not None:
                grads = _finalized(what, module, finalize, [n for n, _ in param_names], params, grads)
        return [loss] + grads

    return step


def _forward(module, param_names, state_names, mode):
    """The module's outputs (a rank's local part of a DTensor output)."""
    from torch.nn.utils.stateless import _reparametrize_module

    def forward(params, state, args):
        tensors = {n: _distributed(p, layout) for (n, layout), p in zip(param_names, params)}
        tensors.update(zip(state_names, state))
        with mode, _reparametrize_module(module, tensors):
            out = module(*args)
        return [_local(o) for o in (out if isinstance(out, (tuple, list)) else [out])]

    return forward


def has_dtensor_parameters(module):
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in module.parameters())


def _finalized(what, module, finalize, names, params, grads):
    """The gradients after the user's `finalize(module)` read and rewrote .grad."""
    for p, g in zip(params, grads):
        p.grad = g
    try:
        finalize(module)
        out = [p.grad for p in params]
    finally:
        for p in params:
            p.grad = None
    for n, g in zip(names, out):
        if not isinstance(g, torch.Tensor):
            raise CaptureError(f"finalize_grads left no gradient for '{n}' of the {what}")
    return out
