"""An MLP parallelized with torch's own tensor-parallel styles
(`parallelize_module` with ColwiseParallel and RowwiseParallel on a 1-D
DeviceMesh): its parameters are DTensors and DTensor inserts the collectives.
User code for the torch 2 capture, as a training step (the squared output)
and as a forward (the output itself).
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from shardproof.capture import Case

HIDDEN, FFN = 8, 16


class Mlp(nn.Module):
    def __init__(self, loss=True):
        super().__init__()
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)
        self.loss = loss

    def forward(self, x):
        y = self.down(torch.relu(self.up(x)))
        return (y * y).sum() if self.loss else y


def step(partial_output=False, loss=True):
    """Correct; with `partial_output`, RowwiseParallel leaves its output a
    Partial (the all-reduce never happens), the DTensor spelling of a dropped
    reduction: each rank squares its partial sum. Without `loss`, the forward
    returns the output itself."""
    down = RowwiseParallel(output_layouts=Partial()) if partial_output else RowwiseParallel()

    def implementation():
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        return parallelize_module(Mlp(loss), mesh, {"up": ColwiseParallel(), "down": down})

    return Case(reference=lambda: Mlp(loss), implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], HIDDEN)}, dynamic={"x": {0: "batch"}})
