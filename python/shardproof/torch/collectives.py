"""The collective nodes shardproof reads, as autograd Functions with ONNX symbolics.

`forward` only has to give a tensor of the right shape (the exporter traces it;
values do not matter). `symbolic` emits the node; its output gets an unsized type
so the exporter cannot bake the traced size into later shape arithmetic.
"""
import torch

# Domains the emitted nodes use; declared in every exported model's opset_import.
CUSTOM_DOMAINS = {"com.microsoft": 1, "shardproof": 1}


def unsized(node, like):
    """`node` with `like`'s type but no sizes (the exporter cannot bake them in)."""
    t = like.type()
    try:
        node.setType(t.with_sizes([None] * t.dim()))
    except (AttributeError, RuntimeError, TypeError):
        pass  # no type information to rewrite: nothing was baked in either
    return node


class Collective(torch.autograd.Function):
    """Marks the Functions whose symbolic is used while exporting; every other
    autograd Function (the user's own, such as Megatron's f and g) is exported
    through its traced forward (see process_group.py)."""


class AllReduce(Collective):
    @staticmethod
    def forward(ctx, x, op):
        return x.clone()

    @staticmethod
    def symbolic(g, x, op):
        if op == "sum":
            return unsized(g.op("com.microsoft::AllReduce", x), x)
        return unsized(g.op("shardproof::AllReduce", x, op_s=op), x)


class AllGather(Collective):
    @staticmethod
    def forward(ctx, x, axis, group_size):
        return torch.cat([x] * group_size, dim=axis)

    @staticmethod
    def symbolic(g, x, axis, group_size):
        return unsized(g.op("com.microsoft::AllGather", x, axis_i=axis, group_size_i=group_size), x)


class ReduceScatter(Collective):
    @staticmethod
    def forward(ctx, x, axis, group_size):
        return torch.chunk(x, group_size, dim=axis)[0].clone()

    @staticmethod
    def symbolic(g, x, axis, group_size):
        return unsized(g.op("shardproof::ReduceScatter", x, axis_i=axis, group_size_i=group_size), x)


class AllToAll(Collective):
    @staticmethod
    def forward(ctx, x, split_axis, concat_axis, group_size):
        parts = torch.chunk(x, group_size, dim=split_axis)
        return torch.cat([parts[0]] * group_size, dim=concat_axis)

    @staticmethod
    def symbolic(g, x, split_axis, concat_axis, group_size):
        node = g.op("shardproof::AllToAll", x, split_axis_i=split_axis, concat_axis_i=concat_axis,
                    group_size_i=group_size)
        return unsized(node, x)


# ONNX op types of the nodes above, for reading exported graphs back.
NODE_TYPES = {("com.microsoft", "AllReduce"), ("shardproof", "AllReduce"), ("com.microsoft", "AllGather"),
              ("shardproof", "ReduceScatter"), ("shardproof", "AllToAll")}
