"""One rank of a simulated world: torch's own fake process group backend.

Each rank runs in this one process under `dist.init_process_group("fake")`,
so `get_rank`, `get_world_size`, `new_group`, DeviceMesh and DTensor behave as
on a real cluster, and no collective communicates. The groups a program makes
are read back by name when its graph is written (`ranks_of`).
"""
import contextlib

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ..errors import CaptureError  # noqa: F401 (the package's one error type)


@contextlib.contextmanager
def fake_world(rank, world_size):
    """Rank `rank` of `world_size` on the fake backend, torn down on exit."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise CaptureError("torch.distributed is already initialized in this process: shardproof runs each rank "
                           "under a fake process group of its own (call export before init_process_group)")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def ranks_of(group_name):
    """The global ranks, in group order, of the process group named
    `group_name` (a functional collective's last argument)."""
    group = c10d._resolve_process_group(group_name)
    return list(dist.get_process_group_ranks(group))


def group_label(group_name):
    """A readable name for messages: the mesh dimension or the ranks."""
    ranks = ranks_of(group_name)
    return f"group {group_name} (ranks {ranks})"
