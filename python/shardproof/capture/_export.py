"""The reference and every rank, traced and written as ONNX files."""
import dataclasses
import os
import re
import shutil
import tempfile
from typing import List

import onnx
import torch

from . import _aten
from ._intercept import Call
from ._onnx import write
from ..sites import exception_site
from ._joint import has_dtensor_parameters, output_names as step_output_names, trace_step
from ._trace import MIN_SIZE, trace
from ._world import CaptureError, fake_world

SIZE_MIN_KEY = "shardproof.size_min"  # model metadata: "name=2;..." sizes the graph holds from
ASSUME_KEY = "shardproof.assume"  # model metadata: the size condition the graph holds under


@dataclasses.dataclass
class Exported:
    directory: str
    reference: str
    ranks: List[str]
    collectives: List[Call]  # rank 0's collective calls, in order


def example_sizes(case, world_size):
    if case.sizes is not None:
        sizes = case.sizes(world_size) if callable(case.sizes) else case.sizes
        if isinstance(sizes, (list, tuple)):
            sizes = sizes[0]  # the old path's two assignments: one is enough here
        return dict(sizes)
    names = sorted({n for axes in list(case.dynamic.values()) + list((case.rank_dynamic or {}).values())
                    for n in axes.values()})
    # Distinct per name, multiples of the world size, at least 2.
    return {n: world_size * (2 + i) + (world_size == 1) for i, n in enumerate(names)}


def _build(what, factory):
    torch.manual_seed(0)
    try:
        module = factory()
    except CaptureError:
        raise
    except Exception as e:  # the user's constructor failed: say which one, with its location
        raise CaptureError(f"building the {what} failed: {type(e).__name__}: {e}{exception_site(e)}") from e
    if not isinstance(module, torch.nn.Module):
        raise CaptureError(f"the {what} factory returned {type(module).__name__}, not a torch.nn.Module")
    return module.eval()


def _feed(what, fn, *args):
    try:
        inputs = fn(*args)
    except Exception as e:
        raise CaptureError(f"making the {what}'s inputs failed: {type(e).__name__}: {e}{exception_site(e)}") from e
    if not isinstance(inputs, dict):
        raise CaptureError(f"the {what}'s inputs must be a dict name -> tensor, got {type(inputs).__name__}")
    return inputs


def _output_names(case, traced):
    n = traced.n_outputs
    if case.outputs:
        if len(case.outputs) != n:
            raise CaptureError(f"Case.outputs names {len(case.outputs)} outputs, the reference returns {n}")
        return list(case.outputs)
    return ["y"] if n == 1 else [f"y{i}" for i in range(n)]


def _one(what, rank, world, factory, feed, dynamic, outputs, case, sizes, train=False):
    """One graph: (model, output names, collective calls). When torch left
    guards in it (a size it could not reason about for every value), it is
    traced again at other sizes: the same graph under another guard holds
    wherever either guard does, and that disjunction is what the graph claims."""
    model, names, calls, guards = _trace_one(what, rank, world, factory, feed, dynamic, outputs, case, sizes,
                                              train)
    if guards:
        other = {n: v + max(world, 2) for n, v in sizes.items()}
        again, _, _, guards2 = _trace_one(what, rank, world, factory, feed, dynamic, names, case, other, train)
        if again.graph.SerializeToString() != model.graph.SerializeToString():
            raise CaptureError(f"the {what}'s graph depends on the example sizes: traced at {sizes} under "
                               f"{' and '.join(guards)}, and at {other} it differs")
        if not _covers_every_size(guards, guards2):
            unique = [g for i, g in enumerate((guards, guards2)) if i == 0 or g != guards]
            claim = " or ".join(f"({' and '.join(g)})" for g in unique)
            onnx.helper.set_model_props(model, {**_props(model), ASSUME_KEY: claim})
    return model, names, calls


_NOT_ONE = re.compile(r"^\((\w+) != (-?\d+)\)$")


def _covers_every_size(a, b):
    """Whether (all of a) or (all of b) holds at every size: the usual case of
    guards that only exclude the example size itself (`seq != 6` from one
    trace, `seq != 8` from the other) is a disjunction no size breaks."""
    ma, mb = [_NOT_ONE.match(g) for g in a], [_NOT_ONE.match(g) for g in b]
    if not all(ma) or not all(mb):
        return False
    # Breaking it needs one guard of each false at once: one size equal to
    # two different constants.
    return all(x.group(1) == y.group(1) and x.group(2) != y.group(2) for x in ma for y in mb)


def _props(model):
    return {p.key: p.value for p in model.metadata_props}


def _trace_one(what, rank, world, factory, feed, dynamic, outputs, case, sizes, train):
    with fake_world(rank, world):
        module = _build(what, factory)
        inputs = feed(sizes)
        dyn = {n: a for n, a in dynamic.items() if n in inputs}
        if train:
            traced = trace_step(what, module, inputs, dyn, case.finalize_grads)
            names = step_output_names(module)
        else:
            traced = (trace_step(what, module, inputs, dyn, forward=True) if has_dtensor_parameters(module)
                      else trace(what, module, inputs, dyn))
            names = outputs or _output_names(case, traced)
        model, guards = write(traced, what, names, _aten.ROWS)
    names_used = sorted({s for axes in dyn.values() for s in axes.values()})
    onnx.helper.set_model_props(model, {SIZE_MIN_KEY: ";".join(f"{s}={MIN_SIZE}" for s in names_used)})
    return model, names, traced.calls, guards


def export(case, world_size, out, log=None, train=False) -> Exported:
    """Writes OUT/reference.onnx and OUT/rank{r}.onnx; raises CaptureError on
    any problem, and then writes nothing. With `train` each graph is the
    training step: the loss, then `grad:<param>` for every parameter."""
    if world_size < 1:
        raise CaptureError(f"--world-size must be at least 1, got {world_size}")
    say = log or (lambda msg: None)
    sizes = example_sizes(case, world_size)
    rank_inputs = case.rank_inputs or (lambda s, r, p: case.inputs(s))
    rank_dynamic = case.rank_dynamic if case.rank_dynamic is not None else case.dynamic
    ref, names, _ = _one("reference", 0, 1, case.reference, lambda s: _feed("reference", case.inputs, dict(s)),
                         case.dynamic, None, case, sizes, train)
    say(f"traced the reference: {len(ref.graph.node)} nodes")
    models, calls = [], []
    for r in range(world_size):
        what = f"implementation on rank {r}"
        model, _, c = _one(what, r, world_size, case.implementation,
                           lambda s: _feed(what, rank_inputs, dict(s), r, world_size), rank_dynamic, names, case,
                           sizes, train)
        say(f"traced rank {r}: {len(model.graph.node)} nodes, {len(c)} collective calls")
        models.append(model)
        calls.append(c)
    _same_collectives(calls)
    return _write(ref, models, out, calls[0])


def _signature(calls):
    return [(c.kind, tuple(sorted(c.attrs.items()))) for c in calls]


def _same_collectives(calls):
    for r in range(1, len(calls)):
        if _signature(calls[r]) != _signature(calls[0]):
            show = lambda cs: "\n          ".join(c.describe() for c in cs) or "(none)"  # noqa: E731
            raise CaptureError(f"rank {r} calls other collectives than rank 0 (every rank must call the same ones "
                               f"in the same order, or the real run deadlocks or mixes tensors):\n  rank 0: "
                               f"{show(calls[0])}\n  rank {r}: {show(calls[r])}")


def _write(ref, models, out, calls):
    parent = os.path.dirname(os.path.abspath(out)) or "."
    if not os.path.isdir(parent):
        raise CaptureError(f"cannot write into {out}: the directory {parent} does not exist")
    if os.path.exists(out) and not os.path.isdir(out):
        raise CaptureError(f"--out {out} exists and is not a directory")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".capture-", dir=out)
    try:
        files = ["reference.onnx"] + [f"rank{r}.onnx" for r in range(len(models))]
        for name, model in zip(files, [ref] + models):
            onnx.save(model, os.path.join(tmp, name))
        for name in files:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    paths = [os.path.join(out, f) for f in files]
    return Exported(out, paths[0], paths[1:], calls)
