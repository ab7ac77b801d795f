"""A simulated process group: rank r of P in one process, no communication.

Inside `simulated(rank, world_size)` the torch.distributed API that sharded
model code calls is replaced, so the code runs unmodified under
torch.onnx.export and each collective becomes the node shardproof reads:

    all_reduce (SUM, MAX, MIN), all_gather, all_gather_into_tensor
    (_all_gather_base), reduce_scatter, reduce_scatter_tensor
    (_reduce_scatter_base), all_to_all_single (equal splits); get_rank,
    get_world_size, is_initialized, is_available, new_group and group
    arguments for the one group of all ranks, barrier.

Collectives keep torch's in-place contract: after `all_reduce(t)` every later
read of `t` in the traced graph reads the collective's output. Anything else
(broadcast, send/recv, uneven all_to_all splits, a second group, ...) raises
CaptureError naming the call and the user's file:line: a collective the
prover does not know must never turn into a wrong graph.

User-defined autograd Functions (Megatron's f and g) are exported through
their traced forward: their `symbolic`, if any, is written for a real process
group (Megatron's calls an in-place all_reduce on a graph value). Under
`training()` they are applied for real instead, so autograd runs their
`backward` (Megatron's f all-reduces the input gradient there), and the
collectives are invisible to autograd, as real ones are: torch differentiates
through an in-place all_reduce as through the identity, and not at all into
the input of an all_gather.
"""
import contextlib
import os
import traceback

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import collectives as C

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


from ..errors import CaptureError  # noqa: E402,F401 (the package exports it)


def call_site():
    """The innermost frame of the user's code (outside this package and torch),
    as 'file:line in function'."""
    for frame in reversed(traceback.extract_stack()):
        path = os.path.abspath(frame.filename)
        if path.startswith(_PACKAGE_DIR) or path.startswith(_TORCH_DIR):
            continue
        return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return "<unknown location>"


class Group:
    """The one process group of the simulation (every rank)."""

    def __init__(self, world_size):
        self.world_size = world_size

    def __repr__(self):
        return f"<simulated process group of {self.world_size} ranks>"

    def size(self):
        return self.world_size


class Recorder:
    """What one rank's run called, in order: (kind, attributes, call site)."""

    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size
        self.group = Group(world_size)
        self.calls = []

    def record(self, kind, **attrs):
        site = call_site()
        self.calls.append((kind, attrs, site))
        return site


_active = None  # the Recorder of the rank being exported


def _rec():
    if _active is None:
        raise CaptureError("torch.distributed was called outside shardproof's simulated process group")
    return _active


def _check_group(group, call):
    r = _rec()
    if group is None or group is r.group or group is dist.group.WORLD or group is c10d.GroupMember.WORLD:
        return
    raise CaptureError(f"{call} at {call_site()}: only the one process group of all {r.world_size} ranks is "
                       f"supported, got {group!r}")


def _op_name(op, call):
    for name in ("SUM", "MAX", "MIN"):
        if op == getattr(dist.ReduceOp, name):
            return name.lower()
    raise CaptureError(f"{call} at {call_site()}: reduce op {op} is not supported (SUM, MAX and MIN are)")


class _Done:
    """What an async_op=True call returns: the work is already done."""

    def wait(self, *args, **kwargs):
        return True

    def is_completed(self):
        return True


def _ret(async_op):
    return _Done() if async_op else None


def _single_rank():
    return _rec().world_size == 1


# --- the intercepted API ---------------------------------------------------

def get_rank(group=None):
    _check_group(group, "get_rank")
    return _rec().rank


def get_world_size(group=None):
    _check_group(group, "get_world_size")
    return _rec().world_size


def is_initialized():
    return _active is not None


def is_available():
    return True


def init_process_group(*args, **kwargs):
    pass  # already "initialized": rank and world size come from the simulation


def destroy_process_group(group=None):
    pass


def get_backend(group=None):
    return "simulated"


def barrier(group=None, async_op=False, device_ids=None):
    _check_group(group, "barrier")
    return _ret(async_op)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    r = _rec()
    if ranks is not None and sorted(ranks) != list(range(r.world_size)):
        raise CaptureError(f"new_group(ranks={list(ranks)}) at {call_site()}: only a group of all "
                           f"{r.world_size} ranks is supported (one process group)")
    return r.group


def _write(target, value):
    """target.copy_(value), outside autograd while a training step is exported
    (a real collective writes its result without autograd seeing it)."""
    if _train:
        with torch.no_grad():
            target.copy_(value)
    else:
        target.copy_(value)


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    _check_group(group, "all_reduce")
    name = _op_name(op, "all_reduce")
    _rec().record("all_reduce", op=name)
    if not _single_rank():
        _write(tensor, C.AllReduce.apply(tensor, name))
    return _ret(async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    _check_group(group, "all_gather_into_tensor")
    r = _rec()
    r.record("all_gather", axis=0)
    out = C.AllGather.apply(input_tensor, 0, r.world_size) if r.world_size > 1 else input_tensor
    _write(output_tensor, out)
    return _ret(async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    _check_group(group, "all_gather")
    r = _rec()
    if len(tensor_list) != r.world_size:
        raise CaptureError(f"all_gather at {call_site()}: tensor_list has {len(tensor_list)} entries for "
                           f"{r.world_size} ranks")
    r.record("all_gather", axis=0, stacked=True)
    # One collective: gather along a new leading axis, entry i is rank i's tensor.
    stacked = C.AllGather.apply(tensor.unsqueeze(0), 0, r.world_size) if r.world_size > 1 else tensor.unsqueeze(0)
    for i in range(r.world_size):
        _write(tensor_list[i], stacked[i])
    return _ret(async_op)


def reduce_scatter_tensor(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
    _check_group(group, "reduce_scatter_tensor")
    if _op_name(op, "reduce_scatter_tensor") != "sum":
        raise CaptureError(f"reduce_scatter_tensor at {call_site()}: only SUM is supported")
    r = _rec()
    r.record("reduce_scatter", axis=0)
    out = C.ReduceScatter.apply(input, 0, r.world_size) if r.world_size > 1 else input
    _write(output, out)
    return _ret(async_op)


def reduce_scatter(output, input_list, op=dist.ReduceOp.SUM, group=None, async_op=False):
    _check_group(group, "reduce_scatter")
    if _op_name(op, "reduce_scatter") != "sum":
        raise CaptureError(f"reduce_scatter at {call_site()}: only SUM is supported")
    r = _rec()
    if len(input_list) != r.world_size:
        raise CaptureError(f"reduce_scatter at {call_site()}: input_list has {len(input_list)} entries for "
                           f"{r.world_size} ranks")
    r.record("reduce_scatter", axis=0, stacked=True)
    stacked = torch.stack(list(input_list), dim=0)
    out = C.ReduceScatter.apply(stacked, 0, r.world_size) if r.world_size > 1 else stacked
    _write(output, out[0])
    return _ret(async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    _check_group(group, "all_to_all_single")
    r = _rec()
    for name, sizes in (("input_split_sizes", input_split_sizes), ("output_split_sizes", output_split_sizes)):
        if sizes is not None and len(set(int(s) for s in sizes)) > 1:
            raise CaptureError(f"all_to_all_single at {call_site()}: uneven {name}={list(sizes)} are not "
                               "supported (equal splits are)")
    r.record("all_to_all", split_axis=0, concat_axis=0)
    out = C.AllToAll.apply(input, 0, 0, r.world_size) if r.world_size > 1 else input
    _write(output, out)
    return _ret(async_op)


def _unsupported(name):
    def refuse(*args, **kwargs):
        raise CaptureError(f"torch.distributed.{name} at {call_site()} is not supported by shardproof's capture "
                           "(supported: all_reduce SUM/MAX/MIN, all_gather, all_gather_into_tensor, "
                           "reduce_scatter, reduce_scatter_tensor, all_to_all_single with equal splits)")
    return refuse


_INTERCEPTED = {
    "get_rank": get_rank, "get_world_size": get_world_size, "is_initialized": is_initialized,
    "is_available": is_available, "init_process_group": init_process_group,
    "destroy_process_group": destroy_process_group, "get_backend": get_backend, "barrier": barrier,
    "new_group": new_group, "all_reduce": all_reduce, "all_gather": all_gather,
    "all_gather_into_tensor": all_gather_into_tensor, "_all_gather_base": all_gather_into_tensor,
    "reduce_scatter": reduce_scatter, "reduce_scatter_tensor": reduce_scatter_tensor,
    "_reduce_scatter_base": reduce_scatter_tensor, "all_to_all_single": all_to_all_single,
}
_REFUSED = ["broadcast", "send", "recv", "isend", "irecv", "batch_isend_irecv", "scatter", "gather", "reduce",
            "all_to_all", "all_reduce_coalesced", "all_gather_coalesced", "all_gather_object",
            "broadcast_object_list", "scatter_object_list", "gather_object", "monitored_barrier",
            "new_subgroups", "new_subgroups_by_enumeration", "all_reduce_multigpu", "all_gather_multigpu",
            "reduce_multigpu", "reduce_scatter_multigpu", "broadcast_multigpu"]

_real_apply = torch._C._FunctionBase.__dict__["apply"]


class _Ctx:
    """The ctx a user Function's forward gets when it is traced inline."""
    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


class _UserBackward(torch.autograd.Function):
    """Identity on a user Function's inlined outputs whose backward is the user's
    `backward`: the forward is traced as the user wrote it (collectives in it
    become top-level nodes, not nested in a Python op) while autograd runs the
    user's backward (Megatron's f all-reduces the input gradient there)."""

    @staticmethod
    def forward(ctx, user_cls, user_ctx, n_out, *rest):
        ctx.user_cls, ctx.user_ctx, ctx.n_in = user_cls, user_ctx, len(rest) - n_out
        return tuple(rest[:n_out]) if n_out > 1 else rest[0]

    @staticmethod
    def backward(ctx, *grads):
        g = ctx.user_cls.backward(ctx.user_ctx, *grads)
        g = tuple(g) if isinstance(g, (tuple, list)) else (g,)
        g = g + (None,) * (ctx.n_in - len(g))
        # No gradient into the inlined forward's own ops: the user's backward replaces them.
        return (None, None, None) + (None,) * len(grads) + g[:ctx.n_in]


def _ours(cls):
    return cls.__module__.startswith(__name__.rsplit(".", 1)[0])


@classmethod
def _inline_apply(cls, *args):
    if issubclass(cls, C.Collective) or (_train and _ours(cls)):
        return _real_apply.__get__(None, cls)(*args)
    ctx = _Ctx()
    ctx.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    out = cls.forward(ctx, *args)
    if not _train:
        return out
    outs = out if isinstance(out, tuple) else (out,)
    # Detached: autograd must not reach the inlined forward's own ops at all
    # (it would run their backward, e.g. max's, even with no gradient coming).
    outs = tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outs)
    return _real_apply.__get__(None, _UserBackward)(cls, ctx, len(outs), *outs, *args)


def install():
    """Replaces the API on torch.distributed and distributed_c10d; returns an undo."""
    saved = []
    for module in (dist, c10d):
        for name, fn in list(_INTERCEPTED.items()) + [(n, _unsupported(n)) for n in _REFUSED]:
            if hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, fn)
    saved.append((torch.autograd.Function, "apply", torch.autograd.Function.__dict__.get("apply")))
    torch.autograd.Function.apply = _inline_apply

    def undo():
        for module, name, fn in reversed(saved):
            if fn is None:
                delattr(module, name)
            else:
                setattr(module, name, fn)
    return undo


@contextlib.contextmanager
def intercepted():
    """The API replaced for the duration (user code imported inside binds the
    replacements), with no rank active yet."""
    undo = install()
    try:
        yield
    finally:
        undo()


_train = False


@contextlib.contextmanager
def training():
    """User autograd Functions applied for real and collectives hidden from
    autograd, for exporting a training step (see the module's docstring)."""
    global _train
    previous = _train
    _train = True
    try:
        yield
    finally:
        _train = previous


@contextlib.contextmanager
def simulated(rank, world_size):
    """Runs as rank `rank` of `world_size`; yields the Recorder of its calls.
    The API must already be intercepted (see intercepted())."""
    global _active
    previous = _active
    _active = Recorder(rank, world_size)
    try:
        yield _active
    finally:
        _active = previous
