"""Data-parallel training steps: the whole model on every rank, the batch split
across ranks, each rank's loss the mean over its own batch, and the gradients
synchronised after the backward pass the way DistributedDataParallel does
(all-reduce SUM, then divide by the world size). Exported with
`shardproof.torch export --train`.

Factories (`--train --world-size P`):
  mlp_dp                  gradients all-reduced and divided by P: each    VERIFIED
                          rank holds the reference gradient (for an even
                          batch split; the mean of per-rank means is the
                          global mean only when the shards are equal)
  mlp_dp_averaged_twice   divided by P a second time (a hand-written      REFUTED
                          average on top of one the framework already
                          does): the gradients are 1/P too small
  mlp_dp_not_averaged     all-reduced but never divided: P times too      REFUTED
                          large (the learning rate silently scaled by P)
"""
import torch
import torch.distributed
import torch.nn.functional as F
from torch import nn

from shardproof.torch import Case

HIDDEN, FFN = 8, 32


class MlpBlock(nn.Module):
    """LayerNorm + MLP with a residual; the loss is the mean squared error over
    the batch this rank sees."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)

    def forward(self, x, target):
        y = x + self.down(F.gelu(self.up(self.norm(x))))
        return ((y - target) * (y - target)).mean()


def ddp_average(divide_times=1):
    """After backward, as DDP's reducer: sum every gradient over the ranks and
    divide by the world size (`divide_times` says how often the code does)."""

    def finalize(module):
        world = torch.distributed.get_world_size()
        for p in module.parameters():
            torch.distributed.all_reduce(p.grad)
            for _ in range(divide_times):
                p.grad = p.grad / world

    return finalize


def _case(divide_times=1):
    def inputs(sizes):
        shape = (sizes["seq"], sizes["batch"], HIDDEN)
        return {"x": torch.randn(*shape), "target": torch.randn(*shape)}

    def rank_inputs(sizes, rank, world):
        return {k: torch.chunk(v, world, dim=1)[rank] for k, v in inputs(sizes).items()}

    axes = {0: "seq", 1: "batch"}
    local = {0: "seq", 1: "batch_local"}
    return Case(reference=MlpBlock, implementation=MlpBlock, inputs=inputs, rank_inputs=rank_inputs,
                dynamic={"x": axes, "target": axes}, rank_dynamic={"x": local, "target": local},
                finalize_grads=ddp_average(divide_times))


def mlp_dp():
    return _case()


def mlp_dp_averaged_twice():
    return _case(divide_times=2)


def mlp_dp_not_averaged():
    return _case(divide_times=0)
