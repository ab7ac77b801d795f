"""One module traced with torch.export at symbolic sizes.

Each dynamic size is a `torch.export.Dim` with minimum 2 (torch specializes
sizes 0 and 1, so the graph says nothing about them: the claim starts at 2).
torch.export refuses a program whose graph holds only for some sizes in that
range (a guard such as `seq % 2 == 0`, or a size baked in): that refusal is
the capture's answer, naming the size, never a graph for the sizes it saw.
Functionalization (`run_decompositions`) makes every alias exact.
"""
import dataclasses
import re
import warnings
from typing import Dict, List

import torch
from torch.export import Dim

from ._intercept import Call, Intercept
from ..sites import exception_site
from ._world import CaptureError

MIN_SIZE = 2


@dataclasses.dataclass
class Traced:
    program: torch.export.ExportedProgram
    input_names: List[str]
    dynamic: Dict[str, Dict[int, str]]
    calls: List[Call]


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
    dims = {}
    shapes = []
    for n in names:
        axes = dynamic.get(n, {})
        t = inputs[n]
        for axis in axes:
            if not isinstance(t, torch.Tensor) or not -t.dim() <= axis < t.dim():
                raise CaptureError(f"the dynamic axes give input '{n}' axis {axis}, which it does not have")
        shapes.append({axis: dims.setdefault(size, Dim(size, min=MIN_SIZE)) for axis, size in axes.items()} or None)
    return tuple(shapes)


def trace(what, module, inputs, dynamic):
    """Exports `module` fed with `inputs` (name -> tensor, in forward's order);
    `dynamic` maps an input name to {axis: size name}."""
    names = list(inputs)
    for n, axes in dynamic.items():
        for axis, size in axes.items():
            value = inputs[n].shape[axis] if n in inputs else None
            if value is not None and value < MIN_SIZE:
                raise CaptureError(f"the example size of '{size}' ({n} axis {axis}) is {value}: torch.export "
                                   f"specializes sizes 0 and 1, so examples start at {MIN_SIZE}")
    wrapper = _Traced(module)
    wrapper.intercept = Intercept()
    args = tuple(inputs[n] for n in names)
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
        raise CaptureError(f"tracing the {what} failed: {_summary(e, names)}{exception_site(e)}") from e
    unwaited = wrapper.intercept.unwaited()
    if unwaited:
        raise CaptureError(f"the {what} never waits for {unwaited[0].describe()}: its result is never written")
    _refuse_mutations(what, program)
    return Traced(program, names, {n: dict(a) for n, a in dynamic.items()}, wrapper.intercept.calls)


def _decompositions():
    """Core ATen, but linear and matmul stay whole: decomposed, a 3-D matmul
    flattens its batch dims into a 2-D mm and back, and the prover would
    reason through the // and % of those reshapes instead of one MatMul."""
    table = torch.export.default_decompositions()
    for op in (torch.ops.aten.linear.default, torch.ops.aten.matmul.default):
        table.pop(op, None)
    return table


def _summary(e, names):
    """torch's message in one line: its first sentence and the guards, with
    `L['args'][0].size()[1]` written as `x.shape[1]`."""
    text = str(e).strip() or type(e).__name__
    text = re.sub(r"L\['args'\]\[0\]\[(\d+)\]|L\['args'\]\[(\d+)\]",
                  lambda m: _arg_name(names, int(m.group(1) or m.group(2))), text)
    text = text.replace(".size()[", ".shape[")
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    head = re.sub(r" For more information, run with TORCH_LOGS=\S+", "", lines[0] if lines else text)
    parts = [head]
    for l in lines[1:]:
        for clause in re.split(r"(?=- Not all values)", l):
            clause = clause.strip(" -.")
            if clause.startswith("Not all values") and clause not in parts:
                parts.append(clause)
    msg = "; ".join(parts)
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
