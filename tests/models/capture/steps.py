"""Training steps for the torch 2 capture: a tensor-parallel MLP after a
LayerNorm whose f Function all-reduces the input gradient in its backward,
written through an alias (`.view`) the way the TorchScript path lost it.
VARIANT picks f's backward; each comment says whether the program is right.
"""
import torch
import torch.distributed as dist
from torch import nn

from shardproof.capture import Case

import aliases

VARIANT = ["plain"]
HIDDEN, FFN = 8, 16


def reduce_gradient(g, variant):
    if variant == "plain":  # right
        dist.all_reduce(g)
    elif variant == "view":  # right: the view is the gradient's storage
        dist.all_reduce(g.view(-1))
    elif variant == "view_twice":  # wrong: P times the sum
        dist.all_reduce(g.view(-1))
        dist.all_reduce(g.view(-1))
    elif variant == "missing":  # wrong: each rank keeps its part
        pass


class F(torch.autograd.Function):
    """Identity forward; the input gradient summed over ranks (Megatron's f)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        reduce_gradient(g, VARIANT[0])
        return g


class G(torch.autograd.Function):
    """The partial outputs summed over ranks; identity backward (Megatron's g)."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Reference(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)

    def forward(self, x, target):
        y = self.fc2(torch.relu(self.fc1(self.norm(x))))
        return ((y - target) * (y - target)).sum()


class RowParallelLinear(aliases.RowParallelLinear):
    """y = x_r @ w_r^T summed over ranks by g, then the bias."""

    def forward(self, x):
        return G.apply(x @ self.weight.t()) + self.bias


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN // dist.get_world_size())
        self.fc2 = RowParallelLinear(FFN, HIDDEN)

    def forward(self, x, target):
        y = self.fc2(torch.relu(self.fc1(F.apply(self.norm(x)))))
        return ((y - target) * (y - target)).sum()


def case(variant="plain"):
    def implementation():
        VARIANT[0] = variant
        return Parallel()

    return Case(reference=Reference, implementation=implementation,
                inputs=lambda s: {"x": torch.randn(s["batch"], HIDDEN), "target": torch.randn(s["batch"], HIDDEN)},
                dynamic={"x": {0: "batch"}, "target": {0: "batch"}})


class Counting(nn.Module):
    """Counts its calls in a buffer: state a pure step cannot hold."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, target):
        self.calls += 1
        return ((self.fc(x) - target) ** 2).sum()


def counting_case():
    return Case(reference=Counting, implementation=Counting,
                inputs=lambda s: {"x": torch.randn(s["batch"], HIDDEN), "target": torch.randn(s["batch"], HIDDEN)},
                dynamic={"x": {0: "batch"}, "target": {0: "batch"}})
