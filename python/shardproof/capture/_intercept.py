"""torch.distributed's classic API, traced exactly.

`dist.all_reduce(t)` and its kin mutate their argument in place; traced, each
becomes the functional collective of `torch.distributed._functional_collectives`
followed by `t.copy_(result)`, and torch.export's functionalization then makes
every alias of `t` (a `.view`, `.data`, a slice) read the result, as on a real
cluster. A call is recorded with the user's line. With `async_op=True` the
write happens at `wait()`, and a read of the tensor (or an alias) before it is
an error naming both lines: on a real cluster that read races the collective.
Calls shardproof cannot express (send/recv, broadcast from a tensor list, ...)
raise CaptureError naming the call and the line: never a wrong graph.
"""
import dataclasses
import inspect
from typing import List

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from torch.overrides import TorchFunctionMode

from ..sites import call_site
from ._world import CaptureError

_OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.MAX: "max", dist.ReduceOp.MIN: "min",
        dist.ReduceOp.AVG: "avg", dist.ReduceOp.PRODUCT: "product", dist.ReduceOp.BAND: "band",
        dist.ReduceOp.BOR: "bor", dist.ReduceOp.BXOR: "bxor", dist.ReduceOp.PREMUL_SUM: "premul_sum"}
_SUPPORTED_OPS = ("sum", "max", "min")


@dataclasses.dataclass
class Call:
    kind: str
    attrs: dict
    site: str

    def describe(self):
        attrs = ", ".join(f"{k}={v}" for k, v in self.attrs.items())
        return f"{self.kind}({attrs}) at {self.site}"


def _op_name(op, call, site):
    for known, name in _OPS.items():
        if op == known:
            if name not in _SUPPORTED_OPS:
                raise CaptureError(f"{call}(op={name.upper()}) at {site}: shardproof reduces with SUM, MAX or MIN only")
            return name
    raise CaptureError(f"{call} at {site}: unknown reduce op {op!r}")


def _group(group):
    group = dist.group.WORLD if group is None else group
    if group not in dist.distributed_c10d._world.pg_map:
        raise CaptureError(f"a collective at {call_site()} runs over a process group that belongs to no live world "
                           "(made while tracing an earlier rank or graph and kept in a module-level cache, such as "
                           "a parallel_state): shardproof builds each rank in a fresh world, so the factory must "
                           "reset such caches before building")
    return group


def _over(group, fn, x, *args):
    """fn(x, *args, group), the functional collective over the program's
    group; over a group of one rank every collective returns its input (the
    reference, traced at world size 1, runs the program's own
    synchronization code too)."""
    group = _group(group)
    return x.clone() if dist.get_world_size(group) == 1 else fn(x, *args, group)


def _root(t):
    return t._base if getattr(t, "_base", None) is not None else t


class _Pending:
    """An async collective whose result is written into `target` at wait()."""

    def __init__(self, mode, call, writes):
        self.mode, self.call, self.writes, self.done = mode, call, writes, False

    def wait(self, timeout=None):
        if not self.done:
            self.done = True
            self.mode.pending.remove(self)
            for target, value in self.writes:
                with torch.no_grad():
                    target.copy_(value)
        return True

    def is_completed(self):
        return self.done

    def get_future(self):
        raise CaptureError(f"{self.call.describe()}: Work.get_future() is not supported; call wait()")


class Intercept(TorchFunctionMode):
    """Maps the classic collectives to functional ones while a rank traces."""

    def __init__(self):
        super().__init__()
        self.calls: List[Call] = []
        self.pending: List[_Pending] = []
        self._data_roots = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is not None:
            return handler(self, func, inspect.signature(func).bind(*args, **kwargs).arguments)
        if func in _REFUSED:
            raise CaptureError(f"{func.__name__} at {call_site()}: {_REFUSED[func]}")
        if self.pending:
            self._check_reads(func, args, kwargs)
        if func == _DATA_GET:
            # `.data` is an alias without autograd: detach() is the same alias
            # to functionalization, so a collective on it reaches the tensor.
            alias = args[0].detach()
            self._data_roots[id(alias)] = _root(args[0])
            return alias
        return func(*args, **kwargs)

    def _root(self, t):
        return self._data_roots.get(id(t), _root(t))

    def _check_reads(self, func, args, kwargs):
        roots = {id(self._root(t)) for t in _tensors(args, kwargs)}
        for p in self.pending:
            for target, _ in p.writes:
                if id(self._root(target)) in roots:
                    raise CaptureError(
                        f"{p.call.describe()} is read at {call_site()} before its wait(): with async_op=True the "
                        "tensor holds its result only after wait(), and a read before it races the collective")

    def record(self, kind, **attrs):
        call = Call(kind, attrs, call_site())
        self.calls.append(call)
        return call

    def finish(self, call, writes, async_op):
        """Writes the results now, or at wait() for an async call."""
        if async_op:
            work = _Pending(self, call, writes)
            self.pending.append(work)
            return work
        with torch.no_grad():
            for target, value in writes:
                target.copy_(value)
        return None

    def unwaited(self):
        return [p.call for p in self.pending]


# A method-wrapper: a new object at every attribute access, equal but not identical.
_DATA_GET = torch.Tensor.data.__get__


def _tensors(args, kwargs):
    out = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    return out


def _all_reduce(mode, func, a):
    call = mode.record("all_reduce", op=None)
    op = _op_name(a.get("op", dist.ReduceOp.SUM), "all_reduce", call.site)
    call.attrs["op"] = op
    t = a["tensor"]
    result = _over(a.get("group"), fc.all_reduce, t, op)
    return mode.finish(call, [(t, result)], a.get("async_op", False))


def _all_gather_into_tensor(mode, func, a):
    call = mode.record("all_gather_into_tensor")
    result = _over(a.get("group"), fc.all_gather_tensor, a["input_tensor"], 0)
    return mode.finish(call, [(a["output_tensor"], result)], a.get("async_op", False))


def _all_gather(mode, func, a):
    call = mode.record("all_gather")
    outs, t = a["tensor_list"], a["tensor"]
    result = _over(a.get("group"), fc.all_gather_tensor, t, 0)
    # The gathered rows, rank by rank (chunk would compute a ceil over the
    # symbolic size and specialize it).
    parts = result.view(len(outs), *t.shape).unbind(0)
    return mode.finish(call, list(zip(outs, parts)), a.get("async_op", False))


def _reduce_scatter_tensor(mode, func, a):
    call = mode.record("reduce_scatter_tensor", op=None)
    op = _op_name(a.get("op", dist.ReduceOp.SUM), "reduce_scatter_tensor", call.site)
    call.attrs["op"] = op
    result = _over(a.get("group"), fc.reduce_scatter_tensor, a["input"], op, 0)
    return mode.finish(call, [(a["output"], result)], a.get("async_op", False))


def _reduce_scatter(mode, func, a):
    call = mode.record("reduce_scatter", op=None)
    op = _op_name(a.get("op", dist.ReduceOp.SUM), "reduce_scatter", call.site)
    call.attrs["op"] = op
    stacked = torch.cat(list(a["input_list"]), dim=0)
    result = _over(a.get("group"), fc.reduce_scatter_tensor, stacked, op, 0)
    return mode.finish(call, [(a["output"], result)], a.get("async_op", False))


def _all_to_all_single(mode, func, a):
    call = mode.record("all_to_all_single")
    if a.get("output_split_sizes") is not None or a.get("input_split_sizes") is not None:
        raise CaptureError(f"all_to_all_single at {call.site}: split sizes are not supported yet (equal splits only)")
    result = _over(a.get("group"), fc.all_to_all_single, a["input"], None, None)
    return mode.finish(call, [(a["output"], result)], a.get("async_op", False))


_HANDLERS = {
    dist.all_reduce: _all_reduce,
    dist.all_gather: _all_gather,
    dist.reduce_scatter: _reduce_scatter,
    dist.all_to_all_single: _all_to_all_single,
    # all_gather_into_tensor, _all_gather_base, reduce_scatter_tensor and
    # _reduce_scatter_base call these (torch 2.13); older names are kept.
    dist.all_gather_single: _all_gather_into_tensor,
    dist.reduce_scatter_single: _reduce_scatter_tensor,
    dist.all_gather_into_tensor: _all_gather_into_tensor,
    dist.reduce_scatter_tensor: _reduce_scatter_tensor,
}

_P2P = "point-to-point communication is not supported yet (pipeline stages: see docs/pytorch.md)"
_REFUSED = {f: why for f, why in (
    (dist.send, _P2P), (dist.recv, _P2P), (dist.isend, _P2P), (dist.irecv, _P2P),
    (dist.batch_isend_irecv, _P2P),
    (dist.broadcast, "broadcast is not supported yet"),
    (dist.reduce, "reduce to one rank is not supported yet"),
    (dist.scatter, "scatter is not supported yet"),
    (dist.gather, "gather to one rank is not supported yet"),
    (dist.all_to_all, "all_to_all with tensor lists is not supported yet; use all_to_all_single"),
)}
