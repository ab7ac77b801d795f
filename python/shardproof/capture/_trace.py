"""One module traced with torch.export at symbolic sizes.

Each dynamic size is `Dim.DYNAMIC` with minimum 2 (torch specializes sizes 0
and 1, so the graph says nothing about them: the claim starts at 2). A size
torch bakes in is refused, naming the size, never a graph for the sizes it
saw. A range torch narrows (a rotary table of 64 rows read up to `seq`: seq
<= 64) and a guard it cannot decide (`seq % 2 == 0`, kept as an assertion in
the graph) become the graph's claim. Functionalization (`run_decompositions`)
makes every alias exact.
"""
import dataclasses
import re
import warnings
from typing import Dict, List, Union

import torch
from torch.export import Dim

from ._intercept import Call, Intercept
from ..sites import exception_site
from ._world import CaptureError

MIN_SIZE = 2


@dataclasses.dataclass
class Traced:
    """A functional ATen graph, as the ONNX writer reads it (from torch.export
    here, or from make_fx for a training step in _joint.py)."""
    graph_module: torch.fx.GraphModule
    # Placeholder node name -> the graph input's name (a user input or a
    # parameter's path), or a constant tensor torch lifted out of the code.
    placeholders: Dict[str, Union[str, torch.Tensor]]
    symbols: Dict[object, str]  # sympy symbol of a dynamic size -> its name
    n_outputs: int
    calls: List[Call]
    guards: List[str] = dataclasses.field(default_factory=list)  # size conditions the graph assumes


class _Traced(torch.nn.Module):
    """Runs the user's module under the collective interception; its own
    name is dropped from parameter and module paths when the graph is written."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.intercept = None

    def forward(self, *args):
        with self.intercept:
            return self.inner(*args)


PREFIX = "inner."


def _dynamic_shapes(names, inputs, dynamic):
    shapes = []
    for n in names:
        axes = dynamic.get(n, {})  # each axis checked by check_example_sizes
        shapes.append({axis: Dim.DYNAMIC(min=MIN_SIZE) for axis in axes} or None)
    return tuple(shapes)


def trace(what, module, inputs, dynamic):
    """Exports `module` fed with `inputs` (name -> tensor, in forward's order);
    `dynamic` maps an input name to {axis: size name}."""
    names = list(inputs)
    check_example_sizes(inputs, dynamic)
    wrapper = _Traced(module)
    wrapper.intercept = Intercept()
    # Contiguous: a shard chunked off the last axis has the strides of the
    # whole, and a graph must not depend on how the example was sliced.
    args = tuple(inputs[n].contiguous() if isinstance(inputs[n], torch.Tensor) else inputs[n] for n in names)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # A guard torch cannot prove for every size in range becomes an
            # assertion in the graph (written as the graph's assumption)
            # instead of an error.
            program = torch.export.export(wrapper, args, dynamic_shapes=(_dynamic_shapes(names, inputs, dynamic),),
                                          strict=False, prefer_deferred_runtime_asserts_over_guards=True)
            program = program.run_decompositions(_decompositions())
    except CaptureError:
        raise
    except Exception as e:  # torch's refusal, or the user's code failing under tracing
        raise traced_error(what, e, names, dynamic) from e
    unwaited = wrapper.intercept.unwaited()
    if unwaited:
        raise CaptureError(f"the {what} never waits for {unwaited[0].describe()}: its result is never written")
    _refuse_mutations(what, program)
    sig = program.graph_signature
    symbols = _symbols(program, names, dynamic)
    return Traced(program.graph_module, _placeholders(program, names), symbols, len(sig.user_outputs),
                  wrapper.intercept.calls, range_conditions(symbols, program.range_constraints))


def range_conditions(symbols, ranges):
    """The ranges torch narrowed a size to (`ranges`: symbol -> value range),
    as spec conditions over the size names `symbols` gives."""
    from torch.utils._sympy.numbers import int_oo

    out = []
    for expr, name in symbols.items():
        vr = ranges.get(expr)
        if vr is not None and vr.lower > MIN_SIZE:
            out.append(f"({name} >= {int(vr.lower)})")
        if vr is not None and vr.upper != int_oo:
            out.append(f"({name} <= {int(vr.upper)})")
    return sorted(set(out))


def _strip(fqn):
    return fqn[len(PREFIX):] if fqn.startswith(PREFIX) else fqn


def _placeholders(program, names):
    sig = program.graph_signature
    out = {k: _strip(v) for k, v in {**sig.inputs_to_parameters, **sig.inputs_to_buffers}.items()}
    out.update({k: program.constants[v] for k, v in sig.inputs_to_lifted_tensor_constants.items()})
    out.update(zip(sig.user_inputs, names))
    return out


def _symbols(program, names, dynamic):
    """Each symbol torch gave a dynamic input size -> its size name."""
    out = {}
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    for node_name, name in zip(program.graph_signature.user_inputs, names):
        val = nodes[node_name].meta.get("val")
        for axis, size in dynamic.get(name, {}).items():
            d = val.shape[axis]
            if not isinstance(d, int):
                out[d.node.expr] = size
    return out


def traced_error(what, e, names, dynamic=None):
    """The CaptureError for an exception out of torch's tracer: ours, when
    torch's cleanup raised another while it unwound (found in the chain)."""
    seen, cause = set(), e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, CaptureError):
            return cause
        seen.add(id(cause))
        cause = cause.__context__ or cause.__cause__
    return CaptureError(f"tracing the {what} failed: {_summary(e, names, dynamic)}{exception_site(e)}")


def check_example_sizes(inputs, dynamic):
    """Every dynamic axis exists and its example size is at least MIN_SIZE."""
    for n, axes in dynamic.items():
        t = inputs.get(n)
        for axis, size in axes.items():
            if t is None:
                continue
            if not isinstance(t, torch.Tensor) or not -t.dim() <= axis < t.dim():
                raise CaptureError(f"the dynamic axes give input '{n}' axis {axis}, which it does not have")
            value = t.shape[axis]
            if value < MIN_SIZE:
                raise CaptureError(f"the example size of '{size}' ({n} axis {axis}) is {value}: torch "
                                   f"specializes sizes 0 and 1, so examples start at {MIN_SIZE}")


def _decompositions():
    """Core ATen, but linear and matmul stay whole: decomposed, a 3-D matmul
    flattens its batch dims into a 2-D mm and back, and the prover would
    reason through the // and % of those reshapes instead of one MatMul. The
    softmax gradients stay whole too (_softmax_grad.py says why)."""
    aten = torch.ops.aten
    table = torch.export.default_decompositions()
    for op in (aten.linear.default, aten.matmul.default, aten._log_softmax_backward_data.default,
               aten._softmax_backward_data.default):
        table.pop(op, None)
    return table


def _summary(e, names, dynamic=None):
    """torch's message in one line: its first sentence and the guards, with
    `L['args'][0].size()[1]` written as `x.shape[1] (size 'seq')`."""
    text = str(e).strip() or type(e).__name__
    text = re.sub(r"L\['args'\]\[0\]\[(\d+)\]|L\['args'\]\[(\d+)\]",
                  lambda m: _arg_name(names, int(m.group(1) or m.group(2))), text)
    text = re.sub(r"inputs\['(\w+)'\]", r"\1", text.replace(".size()[", ".shape["))
    text = re.sub(r"\bargs\[(\d+)\]", lambda m: _arg_name(names, int(m.group(1))), text)
    for n, axes in (dynamic or {}).items():
        for axis, size in axes.items():
            text = text.replace(f"{n}.shape[{axis}]", f"{n}.shape[{axis}] (size '{size}')")
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    head = re.sub(r" For more information, run with TORCH_LOGS=\S+", "", lines[0] if lines else text)
    parts = [head]
    for l in lines[1:]:
        for clause in re.split(r"(?=- Not all values)|(?=- Received)", l):
            clause = clause.strip(" -.")
            if clause.startswith(("Not all values", "Received")) and clause not in parts:
                parts.append(clause)
    msg = "; ".join(p.rstrip(":") for p in parts)
    return msg if len(msg) <= 600 else msg[:600] + " ..."


def _arg_name(names, i):
    return names[i] if i < len(names) else f"input {i}"


def _refuse_mutations(what, program):
    sig = program.graph_signature
    for buf in sig.buffers_to_mutate.values():
        name = buf[len(PREFIX):] if buf.startswith(PREFIX) else buf
        raise CaptureError(f"the {what} writes its buffer '{name}' during forward (a cache?): shardproof compares "
                           "pure functions of the inputs; build the module without the cache or pass it as an input")
    for inp in getattr(sig, "user_inputs_to_mutate", {}).values():
        raise CaptureError(f"the {what} writes its input '{inp}' in place: shardproof compares pure functions of "
                           "the inputs; return the new value instead")
