"""A tensor-parallel MLP whose row-parallel output is all-reduced through an
alias: the collectives the TorchScript exporter lost (a `.view`, `.data`) or
got right only at the traced size (`.contiguous()` on a transposed tensor).
User code for the torch 2 capture (shardproof.capture); VARIANT picks the
reduction, and each comment says whether the program is correct.
"""
import torch
import torch.distributed as dist
from torch import nn

from shardproof.capture import Case

VARIANT = ["plain"]
HIDDEN, FFN = 8, 16


class Reference(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class RowParallelLinear(nn.Module):
    """y = x_r @ w_r^T summed over ranks, then the bias."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in // dist.get_world_size()))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        y = x @ self.weight.t()
        reduce(y, VARIANT[0])
        return y + self.bias


def reduce(y, variant):
    if variant == "plain":  # correct
        dist.all_reduce(y)
    elif variant == "view":  # correct: a view shares y's storage
        dist.all_reduce(y.view(-1))
    elif variant == "data":  # correct: .data is y without autograd
        dist.all_reduce(y.data)
    elif variant == "view_twice":  # bug: P times the sum
        dist.all_reduce(y.view(-1))
        dist.all_reduce(y)
    elif variant == "data_twice":  # bug: P times the sum
        dist.all_reduce(y.data)
        dist.all_reduce(y)
    elif variant == "async":  # correct: waited before the read
        dist.all_reduce(y, async_op=True).wait()
    elif variant == "missing":  # bug: partial sums
        pass
    else:
        raise ValueError(variant)


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        p = dist.get_world_size()
        self.fc1 = nn.Linear(HIDDEN, FFN // p)
        self.fc2 = RowParallelLinear(FFN, HIDDEN)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def case(variant="plain", sizes=None):
    VARIANT[0] = variant
    return Case(reference=Reference, implementation=Parallel,
                inputs=lambda s: {"x": torch.randn(s["batch"], s["seq"], HIDDEN)},
                dynamic={"x": {0: "batch", 1: "seq"}}, sizes=sizes)


class TransposedParallel(Parallel):
    """Megatron's `_reduce` on a sequence-first view: all_reduce(t.contiguous())
    reduces a copy whenever t is not contiguous, and returns t unreduced."""

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        y = (h @ self.fc2.weight.t()).transpose(0, 1)  # [seq, batch, hidden]
        dist.all_reduce(y.contiguous())  # bug for every batch, seq >= 2
        return y.transpose(0, 1) + self.fc2.bias


def contiguous_case(sizes=None):
    VARIANT[0] = "missing"
    c = case("missing", sizes)
    c.implementation = TransposedParallel
    return c


class ReadBeforeWait(Parallel):
    def forward(self, x):
        h = torch.relu(self.fc1(x))
        y = h @ self.fc2.weight.t()
        work = dist.all_reduce(y, async_op=True)
        z = y + self.fc2.bias  # bug: reads y before the reduction is waited for
        work.wait()
        return z


def read_before_wait_case():
    c = case("missing")
    c.implementation = ReadBeforeWait
    return c
