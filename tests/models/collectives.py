"""Collective operators for exporting per-rank graphs with torch.onnx.export.

Each collective is an autograd Function: `forward` only produces a tensor of
the right shape (export traces it, values do not matter), `symbolic` emits the
ONNX node the verifier reads. Outputs get an unsized type so the exporter
cannot bake the traced size into later shape arithmetic.
"""
import os
import sys

import torch

# The capture package's helpers (python/shardproof): one definition of how a
# collective's output loses its traced sizes, and of the custom domains.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
from shardproof.torch.collectives import CUSTOM_DOMAINS, unsized  # noqa: E402



class AllReduce(torch.autograd.Function):
    """com.microsoft::AllReduce: sum over ranks, same shape."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def symbolic(g, x):
        return unsized(g.op("com.microsoft::AllReduce", x), x)


class AllReduceMax(torch.autograd.Function):
    """shardproof::AllReduce with op=max: elementwise max over ranks."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def symbolic(g, x):
        return unsized(g.op("shardproof::AllReduce", x, op_s="max"), x)


class AllGather(torch.autograd.Function):
    """com.microsoft::AllGather: concat of every rank's input along `axis`."""

    @staticmethod
    def forward(ctx, x, axis, group_size):
        return torch.cat([x] * group_size, dim=axis)

    @staticmethod
    def symbolic(g, x, axis, group_size):
        return unsized(g.op("com.microsoft::AllGather", x, axis_i=axis, group_size_i=group_size), x)


class ReduceScatter(torch.autograd.Function):
    """shardproof::ReduceScatter: sum over ranks, then rank r keeps chunk r of `axis`."""

    @staticmethod
    def forward(ctx, x, axis, group_size):
        return torch.chunk(x, group_size, dim=axis)[0].clone()

    @staticmethod
    def symbolic(g, x, axis, group_size):
        return unsized(g.op("shardproof::ReduceScatter", x, axis_i=axis, group_size_i=group_size), x)


class AllToAll(torch.autograd.Function):
    """shardproof::AllToAll: chunk r of every rank's input (cut on split_axis),
    concatenated in rank order on concat_axis."""

    @staticmethod
    def forward(ctx, x, split_axis, concat_axis, group_size):
        parts = torch.chunk(x, group_size, dim=split_axis)
        return torch.cat([parts[0]] * group_size, dim=concat_axis)

    @staticmethod
    def symbolic(g, x, split_axis, concat_axis, group_size):
        node = g.op("shardproof::AllToAll", x, split_axis_i=split_axis, concat_axis_i=concat_axis,
                    group_size_i=group_size)
        return unsized(node, x)


class Mystery(torch.autograd.Function):
    """An operator no verifier knows: the check must say UNKNOWN and name it."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def symbolic(g, x):
        return unsized(g.op("shardproof::Mystery", x), x)


def all_reduce(x):
    return AllReduce.apply(x)


def all_reduce_max(x):
    return AllReduceMax.apply(x)


def all_gather(x, axis, group_size):
    return AllGather.apply(x, axis, group_size)


def reduce_scatter(x, axis, group_size):
    return ReduceScatter.apply(x, axis, group_size)


def all_to_all(x, split_axis, concat_axis, group_size):
    return AllToAll.apply(x, split_axis, concat_axis, group_size)


def mystery(x):
    return Mystery.apply(x)

