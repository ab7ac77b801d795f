#!/usr/bin/env python3
"""Operator census (issue 14): which ONNX op patterns that everyday PyTorch code
exports does shardproof support end to end?

Each catalogue entry is a tiny nn.Module with example inputs and dynamic axes.
It is exported (opset 17), every node is recorded as an op pattern (op type plus
the attributes that change its semantics, e.g. Pad mode, Slice step sign), and
the model is checked against itself (world size 1, everything replicated,
--sample 2) so that shape inference, index maps, evaluation and replay all run.

Usage: .venv/bin/python tools/census/census.py --shardproof build/shardproof \
           [--out docs/operators.census.md] [--only "NAME;NAME"]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import warnings

import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F


class Fn(nn.Module):
    """Wraps a lambda so each catalogue entry is one line."""

    def __init__(self, fn, params=()):
        super().__init__()
        self.fn = fn
        for i, p in enumerate(params):
            self.register_parameter(f"p{i}", nn.Parameter(p))

    def forward(self, *xs):
        return self.fn(self, *xs)


def bsd(d=8):
    """x[batch, seq, d]: the shape most transformer code sees."""
    return (torch.randn(2, 4, d),), {"x": {0: "batch", 1: "seq"}}


def bchw():
    return (torch.randn(2, 3, 8, 8),), {"x": {0: "batch"}}


def rows():
    """x[tokens, d]: a 2-D activation (flattened tokens)."""
    return (torch.randn(4, 8),), {"x": {0: "tokens"}}


def bc4hw():
    return (torch.randn(2, 4, 4, 4),), {"x": {0: "batch"}}


def ids(n=8):
    """Token ids in [0, n): the third item is each integer input's index range,
    written into the spec as `values: {min: 0, max: n - 1}` (docs/spec-format.md)."""
    return (torch.randint(0, n, (2, 4)),), {"x": {0: "batch", 1: "seq"}}, {"x": n}


# name -> (module, inputs-maker). Names say which torch use they exercise.
CATALOGUE = {}


def entry(name, fn, inputs=bsd, params=()):
    CATALOGUE[name] = (lambda: Fn(fn, params), inputs)


def example(inputs):
    """(example inputs, dynamic axes, index range of each integer input)."""
    made = inputs()
    return made if len(made) == 3 else (*made, {})


W = torch.randn(8, 8)
# --- elementwise and activations
for act in ["relu", "gelu", "silu", "sigmoid", "tanh", "softplus", "elu",
            "leaky_relu", "hardswish", "hardsigmoid", "mish", "selu", "celu",
            "relu6", "logsigmoid", "softsign", "tanhshrink"]:
    entry(f"F.{act}", (lambda a: lambda m, x: getattr(F, a)(x))(act))
entry("F.gelu(tanh)", lambda m, x: F.gelu(x, approximate="tanh"))
# nn.PReLU's forward is F.prelu(x, weight): one slope ([1, 1] once exported) or
# one per channel, dim 1 ([C, 1, 1] on [N, C, H, W]; [C] on [tokens, C]).
entry("F.prelu / nn.PReLU(1)", lambda m, x: F.prelu(x, m.p0), params=(torch.tensor([0.25]),))
entry("F.prelu / nn.PReLU(C)", lambda m, x: F.prelu(x, m.p0), bchw, params=(torch.tensor([0.25, -0.5, 2.0]),))
entry("F.prelu / nn.PReLU(C) on [tokens, C]", lambda m, x: F.prelu(x, m.p0), rows, params=(torch.linspace(-1, 1, 8),))
for op in ["exp", "log1p", "sqrt", "rsqrt", "abs", "neg", "sin", "cos",
           "reciprocal", "square", "erf", "floor", "ceil", "round", "sign"]:
    entry(f"torch.{op}", (lambda o: lambda m, x: getattr(torch, o)(x))(op))
entry("x + y", lambda m, x: x + 1.5)
entry("x * y", lambda m, x: x * x)
entry("x / y", lambda m, x: x / 3.0)
entry("x - y", lambda m, x: x - 2.0)
entry("x ** 2", lambda m, x: x ** 2)
entry("torch.pow(x, 3)", lambda m, x: torch.pow(x, 3.0))
entry("torch.clamp", lambda m, x: torch.clamp(x, -1.0, 1.0))
entry("torch.maximum", lambda m, x: torch.maximum(x, x * 2))
entry("torch.minimum", lambda m, x: torch.minimum(x, x * 2))
entry("torch.where", lambda m, x: torch.where(x > 0, x, x * 0.1))
entry("masked_fill", lambda m, x: x.masked_fill(x < 0, float("-inf")))
entry("x.float()", lambda m, x: x.float() * 2)
entry("x.half().float()", lambda m, x: x.half().float())
entry("torch.lerp", lambda m, x: torch.lerp(x, x * 2, 0.5))
entry("torch.addcmul", lambda m, x: torch.addcmul(x, x, x, value=0.5))
# --- reductions and normalizations
entry("x.sum(-1)", lambda m, x: x.sum(-1))
entry("x.mean(-1, keepdim)", lambda m, x: x.mean(-1, keepdim=True))
entry("x.amax(-1)", lambda m, x: x.amax(-1))
entry("x.amin(-1)", lambda m, x: x.amin(-1))
entry("x.max(-1).values", lambda m, x: x.max(-1).values)
entry("x.var(-1)", lambda m, x: x.var(-1, unbiased=False))
entry("x.std(-1)", lambda m, x: x.std(-1))
entry("x.prod(-1)", lambda m, x: x.prod(-1))
entry("x.norm(dim=-1)", lambda m, x: x.norm(dim=-1))
entry("torch.logsumexp", lambda m, x: torch.logsumexp(x, -1))
entry("F.softmax", lambda m, x: F.softmax(x, -1))
entry("F.log_softmax", lambda m, x: F.log_softmax(x, -1))
entry("F.layer_norm", lambda m, x: F.layer_norm(x, (8,)))
entry("F.layer_norm affine", lambda m, x: F.layer_norm(x, (8,), m.p0, m.p1),
      params=(torch.ones(8), torch.zeros(8)))
entry("RMSNorm (manual)", lambda m, x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * m.p0,
      params=(torch.ones(8),))
entry("F.normalize", lambda m, x: F.normalize(x, dim=-1))
entry("F.group_norm", lambda m, x: F.group_norm(x, 3), bchw)
entry("F.instance_norm", lambda m, x: F.instance_norm(x), bchw)
entry("F.batch_norm(eval)", lambda m, x: F.batch_norm(x, torch.zeros(3), torch.ones(3)), bchw)
entry("x.cumsum(1)", lambda m, x: x.cumsum(1))
entry("x.argmax(-1)", lambda m, x: x.argmax(-1))
entry("x.argmin(-1)", lambda m, x: x.argmin(-1))
entry("torch.topk", lambda m, x: torch.topk(x, 2, dim=-1).values)
entry("torch.topk indices", lambda m, x: torch.topk(x, 2, dim=-1).indices)
# --- linear algebra
entry("F.linear", lambda m, x: F.linear(x, m.p0), params=(W,))
entry("F.linear+bias", lambda m, x: F.linear(x, m.p0, m.p1), params=(W, torch.randn(8)))
entry("x @ W", lambda m, x: x @ m.p0, params=(W,))
entry("torch.matmul batched", lambda m, x: torch.matmul(x, x.transpose(1, 2)))
entry("torch.bmm", lambda m, x: torch.bmm(x, x.transpose(1, 2)))
entry("torch.einsum bsd,de", lambda m, x: torch.einsum("bsd,de->bse", x, m.p0), params=(W,))
entry("torch.einsum bqd,bkd", lambda m, x: torch.einsum("bqd,bkd->bqk", x, x))
entry("F.scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention") else "attention (manual)",
      lambda m, x: F.softmax(x @ x.transpose(-1, -2) / 8 ** 0.5, -1) @ x)
entry("F.embedding", lambda m, x: F.embedding(x, m.p0), ids, params=(W,))
entry("F.one_hot", lambda m, x: F.one_hot(x, 8).float(), ids)
# --- layout
entry("x.view(b, s, 2, 4)", lambda m, x: x.view(x.shape[0], x.shape[1], 2, 4))
entry("x.reshape(b, -1, 2, 8)", lambda m, x: x.reshape(x.shape[0], -1, 2, 8))
entry("x.flatten(1)", lambda m, x: x.flatten(1))
entry("x.transpose(1, 2)", lambda m, x: x.transpose(1, 2))
entry("x.permute(2, 0, 1)", lambda m, x: x.permute(2, 0, 1))
entry("x.unsqueeze(1)", lambda m, x: x.unsqueeze(1))
entry("x.unsqueeze(1).squeeze(1)", lambda m, x: x.unsqueeze(1).squeeze(1))
entry("x.contiguous()", lambda m, x: x.transpose(1, 2).contiguous())
entry("x.expand", lambda m, x: x[:, :, :1].expand(-1, -1, 8))
entry("x.repeat", lambda m, x: x.repeat(1, 2, 1))
entry("x.repeat_interleave", lambda m, x: x.repeat_interleave(2, dim=2))
entry("torch.cat", lambda m, x: torch.cat([x, x * 2], -1))
entry("torch.stack", lambda m, x: torch.stack([x, x], 1))
entry("x.split(4, -1)", lambda m, x: x.split(4, -1)[1])
entry("x.split([3, 5], -1)", lambda m, x: x.split([3, 5], -1)[0])
entry("x.chunk(2, -1)", lambda m, x: x.chunk(2, -1)[1])
entry("x.unbind", lambda m, x: x.unbind(-1)[0])
entry("x[:, :, 2:6]", lambda m, x: x[:, :, 2:6])
entry("x[:, -1]", lambda m, x: x[:, -1])
entry("x[:, :, -3:]", lambda m, x: x[:, :, -3:])
entry("x[:, :, ::2]", lambda m, x: x[:, :, ::2])
entry("x[:, 1::2]", lambda m, x: x[:, 1::2])
entry("x.flip(-1)", lambda m, x: x.flip(-1))
entry("x.narrow", lambda m, x: x.narrow(-1, 1, 4))
entry("x[..., None]", lambda m, x: x[..., None])
entry("x.roll(1, 1)", lambda m, x: torch.roll(x, 1, 1))
entry("F.pad constant", lambda m, x: F.pad(x, (1, 2)))
entry("F.pad constant 2 axes", lambda m, x: F.pad(x, (1, 1, 2, 0), value=0.5))
entry("F.pad reflect", lambda m, x: F.pad(x, (1, 1, 1, 1), mode="reflect"), bchw)
entry("F.pad replicate", lambda m, x: F.pad(x, (1, 1, 1, 1), mode="replicate"), bchw)
entry("torch.triu", lambda m, x: torch.triu(x @ x.transpose(1, 2)))
entry("torch.tril", lambda m, x: torch.tril(x @ x.transpose(1, 2)))
entry("causal mask (triu ones)", lambda m, x: (x @ x.transpose(1, 2)).masked_fill(
    torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1), float("-inf")))
entry("torch.arange(seq)", lambda m, x: x + torch.arange(x.shape[1]).unsqueeze(-1))
entry("torch.zeros_like", lambda m, x: x + torch.zeros_like(x))
entry("torch.ones(shape)", lambda m, x: x * torch.ones(x.shape[1], 8))
entry("torch.full", lambda m, x: x + torch.full((x.shape[1], 8), 2.0))
entry("x.new_zeros", lambda m, x: x + x.new_zeros(x.shape))
entry("torch.gather", lambda m, x: torch.gather(x, -1, x.argmax(-1, keepdim=True)))
entry("x.scatter", lambda m, x: torch.zeros_like(x).scatter(-1, x.argmax(-1, keepdim=True), 1.0))
entry("index_select", lambda m, x: x.index_select(-1, torch.tensor([0, 2, 4])))
entry("x[:, :, idx]", lambda m, x: x[:, :, torch.tensor([1, 3])])
# --- vision / patches
entry("F.conv1d", lambda m, x: F.conv1d(x.transpose(1, 2), m.p0, padding=1),
      params=(torch.randn(8, 8, 3),))
entry("F.conv2d", lambda m, x: F.conv2d(x, m.p0, padding=1), bchw, params=(torch.randn(4, 3, 3, 3),))
entry("F.conv2d patchify", lambda m, x: F.conv2d(x, m.p0, stride=4), bchw, params=(torch.randn(4, 3, 4, 4),))
entry("F.unfold", lambda m, x: F.unfold(x, 4, stride=4), bchw)
entry("F.avg_pool2d", lambda m, x: F.avg_pool2d(x, 2), bchw)
entry("F.max_pool2d", lambda m, x: F.max_pool2d(x, 2), bchw)
entry("F.adaptive_avg_pool2d(1)", lambda m, x: F.adaptive_avg_pool2d(x, 1), bchw)
entry("F.interpolate nearest", lambda m, x: F.interpolate(x, scale_factor=2.0), bchw)
entry("F.dropout(eval)", lambda m, x: F.dropout(x, 0.1, training=False))
# --- everyday transformer, MoE and vision code (issue 14: >= 150 distinct uses)
entry("torch.chunk 3-way", lambda m, x: torch.chunk(x, 3, -1)[2])
entry("torch.cat 3 pieces", lambda m, x: torch.cat([x, x * 2, x[:, :, :2]], -1))
entry("x.masked_fill(arange mask)", lambda m, x: x.masked_fill(torch.arange(x.shape[1]).unsqueeze(-1) >= 2, 0.0))
entry("torch.where(cond, x, scalar)", lambda m, x: torch.where(x > 0, x, 0.0))
entry("SwiGLU (F.silu(a) * gate)", lambda m, x: (lambda a, g: F.silu(a) * g)(*x.chunk(2, -1)))
entry("SwiGLU (two projections)", lambda m, x: F.linear(F.silu(F.linear(x, m.p0)) * F.linear(x, m.p1), m.p2),
      params=(torch.randn(16, 8), torch.randn(16, 8), torch.randn(8, 16)))
entry("F.glu", lambda m, x: F.glu(x, -1))
entry("torch.clamp_min", lambda m, x: torch.clamp_min(x, 0.1))
entry("x.clamp(max=)", lambda m, x: x.clamp(max=0.5))
entry("x.t()", lambda m, x: x.t() @ x, rows)
entry("x * torch.sigmoid(x) (manual SiLU)", lambda m, x: x * torch.sigmoid(x))
entry("torch.flatten(x, 0, 1)", lambda m, x: torch.flatten(x, 0, 1))
entry("x.view(-1)", lambda m, x: x.view(-1))
entry("x.squeeze()", lambda m, x: x[:, :1].squeeze())
entry("x.sum(dim=(1, 2))", lambda m, x: x.sum(dim=(1, 2)))
entry("x.sum()", lambda m, x: x.sum())
entry("x.mean(1)", lambda m, x: x.mean(1))
entry("x.max()", lambda m, x: x.max())
entry("x.var(1)", lambda m, x: x.var(1))
entry("torch.baddbmm", lambda m, x: torch.baddbmm(x @ x.transpose(1, 2), x, x.transpose(1, 2), beta=0.5, alpha=0.25))
entry("torch.addmm", lambda m, x: torch.addmm(m.p1, x, m.p0), rows, params=(W, torch.randn(8)))
entry("F.linear on 4-D input", lambda m, x: F.linear(x.view(x.shape[0], x.shape[1], 2, 4), m.p0),
      params=(torch.randn(6, 4),))
entry("F.pixel_shuffle", lambda m, x: F.pixel_shuffle(x, 2), bc4hw)
entry("x.unfold (tensor.unfold)", lambda m, x: x.unfold(2, 4, 4))
entry("x[..., 1:] - x[..., :-1] (diff)", lambda m, x: x[..., 1:] - x[..., :-1])
entry("torch.outer", lambda m, x: torch.outer(x[0, 0], x[1, 0]))
entry("x.repeat_interleave(tensor)", lambda m, x: x.repeat_interleave(torch.tensor([1, 2, 1, 2, 1, 2, 1, 2]), dim=2))
entry("x.expand_as", lambda m, x: x[:, :1].expand_as(x) + x)
entry("torch.tril mask with diagonal", lambda m, x: (x @ x.transpose(1, 2)).masked_fill(
    torch.tril(torch.ones(x.shape[1], x.shape[1]), diagonal=-1) == 0, float("-inf")))
entry("attention with additive mask", lambda m, x: F.softmax(x @ x.transpose(1, 2) / 8 ** 0.5 + torch.triu(
    torch.full((x.shape[1], x.shape[1]), float("-inf")), 1), -1) @ x)
entry("RMSNorm (HF: float, variance, type_as)", lambda m, x: m.p0 * (x.float() * torch.rsqrt(
    x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x), params=(torch.ones(8),))
entry("RMSNorm (x / sqrt(mean + eps))", lambda m, x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5))
entry("ALiBi bias from arange", lambda m, x: x @ x.transpose(1, 2) + 0.5 * (
    torch.arange(x.shape[1]).unsqueeze(0) - torch.arange(x.shape[1]).unsqueeze(1)))
entry("rotary (cat of halves with neg)", lambda m, x: x * m.p0 + torch.cat([-x[..., 4:], x[..., :4]], -1) * m.p1,
      params=(torch.randn(4, 8), torch.randn(4, 8)), inputs=lambda: ((torch.randn(2, 4, 8),), {"x": {0: "batch"}}))
entry("MoE top-1 routing (argmax + one_hot)", lambda m, x: F.one_hot(F.linear(x, m.p0).argmax(-1), 4).float(),
      params=(torch.randn(4, 8),))
entry("MoE gate from routed ids (one_hot)", lambda m, x, e: x * F.one_hot(e, 4).float().sum(-1, keepdim=True),
      lambda: ((torch.randn(2, 4, 8), torch.randint(0, 4, (2, 4))),
               {"x": {0: "batch", 1: "seq"}, "e": {0: "batch", 1: "seq"}}, {"e": 4}))
entry("torch.einsum bhqd,bhkd", lambda m, x: torch.einsum("bhqd,bhkd->bhqk", x.unsqueeze(1), x.unsqueeze(1)))
entry("torch.einsum bsd,d", lambda m, x: torch.einsum("bsd,d->bs", x, m.p0), params=(torch.randn(8),))
entry("torch.einsum ...d,de (ellipsis)", lambda m, x: torch.einsum("...d,de->...e", x, m.p0), params=(W,))
entry("torch.einsum implicit ij,jk", lambda m, x: torch.einsum("ij,jk", x, m.p0), rows, params=(W,))
entry("logits.gather(-1, target)", lambda m, x, t: F.log_softmax(x, -1).gather(-1, t.unsqueeze(-1)).squeeze(-1),
      lambda: ((torch.randn(2, 4, 8), torch.randint(0, 8, (2, 4))),
               {"x": {0: "batch", 1: "seq"}, "t": {0: "batch", 1: "seq"}}, {"t": 8}))
entry("padding mask from ids", lambda m, x, i: x.masked_fill((i == 0).unsqueeze(-1), 0.0),
      lambda: ((torch.randn(2, 4, 8), torch.randint(0, 8, (2, 4))),
               {"x": {0: "batch", 1: "seq"}, "i": {0: "batch", 1: "seq"}}, {"i": 8}))
entry("token + position embedding", lambda m, x: F.embedding(x, m.p0) + F.embedding(torch.arange(x.shape[1]), m.p1),
      ids, params=(W, torch.randn(4, 8)))
entry("split heads (view + transpose)", lambda m, x: x.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2))
entry("merge heads (transpose + reshape)", lambda m, x: x.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2)
      .transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))
entry("GELU (tanh formula)", lambda m, x: 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3))))
entry("stable softmax (manual)", lambda m, x: (lambda e: e / e.sum(-1, keepdim=True))(
    torch.exp(x - x.amax(-1, keepdim=True))))
entry("F.softmax(x.float()).type_as", lambda m, x: F.softmax(x.float(), -1).type_as(x))
entry("ViT patch embedding (conv, flatten(2), transpose)", lambda m, x: F.conv2d(x, m.p0, stride=4).flatten(2)
      .transpose(1, 2), bchw, params=(torch.randn(4, 3, 4, 4),))
entry("ViT cls token (expand + cat)", lambda m, x: torch.cat([m.p0.expand(x.shape[0], -1, -1), x], 1),
      params=(torch.randn(1, 1, 8),))
entry("torch.ones_like", lambda m, x: x + torch.ones_like(x))


def pattern(node, consts):
    """The op type plus the attributes that decide its meaning."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    if op == "Pad":
        mode = attrs.get("mode", b"constant")
        return f"mode={mode.decode() if isinstance(mode, bytes) else mode}"
    if op == "Slice":
        if len(node.input) > 4 and node.input[4] in consts:
            steps = consts[node.input[4]].flatten().tolist()
            return "step=" + ("neg" if any(s < 0 for s in steps) else "1" if all(s == 1 for s in steps) else ">1")
        return "step=default" if len(node.input) <= 4 else "step=computed"
    if op == "Reshape" and node.input[1] in consts:
        shape = consts[node.input[1]].flatten().tolist()
        return "with -1" if -1 in shape else ("with 0" if 0 in shape else "literal")
    if op == "Cast":
        return f"to={onnx.TensorProto.DataType.Name(attrs.get('to', 0))}"
    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"):
        return f"keepdims={attrs.get('keepdims', 1)}"
    if op in ("Conv", "MaxPool", "AveragePool"):
        strides = attrs.get("strides", [1])
        return "stride>1" if any(s > 1 for s in strides) else "stride=1"
    if op == "Resize":
        return f"mode={attrs.get('mode', b'nearest').decode()}"
    return ""


def collect(path):
    model = onnx.load(path)
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = onnx.numpy_helper.to_array(a.t)
    return model, [(n.op_type, n.domain or "ai.onnx", pattern(n, consts), n.name) for n in model.graph.node]


INTEGER_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                 onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def write_spec(dirname, name, model, ranges):
    """Everything replicated; an integer input (token ids, labels) gets its index
    range, as a user would write it, so lookups and masks built from it can be followed."""
    outs = [o.name for o in model.graph.output]
    lines = []
    for i in model.graph.input:
        if i.type.tensor_type.elem_type in INTEGER_TYPES:
            if i.name not in ranges:
                raise ValueError(f"integer input {i.name} has no index range in the catalogue")
            lines.append(f"  \"{i.name}\": {{replicated: true, values: {{min: 0, max: {ranges[i.name] - 1}}}}}\n")
        else:
            lines.append(f"  \"{i.name}\": replicated\n")
    spec = os.path.join(dirname, name + ".yaml")
    with open(spec, "w") as f:
        f.write("shardproof: 1\nreference: m.onnx\nimplementation:\n  world_size: 1\n  ranks: [m.onnx]\n")
        f.write("inputs:\n" + "".join(lines))
        f.write("outputs:\n" + "".join(f"  \"{o}\": replicated\n" for o in outs))
    return spec


def check(shardproof, spec):
    try:
        r = subprocess.run([shardproof, "check", "--sample", "2", spec], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "UNKNOWN", "census timeout (120 s)"
    text = r.stdout + r.stderr
    for verdict in ("VERIFIED", "REFUTED", "UNKNOWN"):
        if re.search(rf"\b{verdict}\b", text):
            line = next((l for l in text.splitlines() if "unsupported" in l or "UNKNOWN" in l), "")
            return verdict, " ".join(line.split())[:160]
    return "ERROR", (text.strip().splitlines() or ["exit %d" % r.returncode])[-1][:160]


def _export(module, xs, path, names, axes):
    """The legacy TorchScript exporter (dynamo=False), as tests/models uses:
    its deprecation notice is expected, not news."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript-based ONNX export")
        torch.onnx.export(module, xs, path, opset_version=17, input_names=names,
                          output_names=["y"], dynamic_axes={**axes, "y": {}}, dynamo=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardproof", required=True)
    ap.add_argument("--out", default="-")
    ap.add_argument("--only", default="")
    ap.add_argument("--expect", default="", help="fail unless every selected entry gets this verdict (for ctest)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(";")))  # entry names contain commas
    uses = collections.Counter()
    ok_patterns, why = set(), {}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for idx, (name, (make, inputs)) in enumerate(CATALOGUE.items()):
            if only and name not in only:
                continue
            d = os.path.join(tmp, f"{idx:03d}")  # names like "x + y" and "x * y" would collide once sanitized
            os.makedirs(d)
            xs, axes, ranges = example(inputs)
            names = list(axes.keys())
            path = os.path.join(d, "m.onnx")
            try:
                _export(make().eval(), xs, path, names, axes)
            except Exception as e:  # an export failure is torch's, not ours: report it, keep going
                results[name] = ("EXPORT", str(e).splitlines()[0][:120])
                continue
            model, nodes = collect(path)
            try:
                spec = write_spec(d, "m", model, ranges)
            except ValueError as e:  # a catalogue mistake: say so instead of guessing a range
                results[name] = ("CATALOGUE", str(e))
                continue
            verdict, reason = check(args.shardproof, spec)
            results[name] = (verdict, reason)
            # Blame only the node the check names; other patterns of a failed entry were not decided by it.
            # "unsupported operator X" names the op, the table line before it the output: blame that op.
            blamed = re.search(r"node '([^']*)'", reason)
            blamed_op = re.search(r"unsupported operator (\w+)", reason)
            for op, dom, pat, node in nodes:
                p = (op, dom, pat)
                if verdict == "VERIFIED":
                    ok_patterns.add(p)
                elif (blamed and node == blamed.group(1)) or (blamed_op and op == blamed_op.group(1)):
                    why.setdefault(p, f"{name}: {verdict} {reason}")
            for p in {(op, dom, pat) for op, dom, pat, _ in nodes}:
                uses[p] += 1
                if verdict != "VERIFIED" and not blamed and not blamed_op:
                    why.setdefault(p, f"{name}: {verdict} {reason} (no node named)")
    rows = ["| op | pattern | catalogue uses | supported | why not |", "|---|---|---|---|---|"]
    for (op, dom, pat), n in sorted(uses.items()):
        ok = (op, dom, pat) in ok_patterns
        status = "yes" if ok else "no" if (op, dom, pat) in why else "untested"
        note = "" if ok else why.get((op, dom, pat), "only in entries stopped earlier by another node")
        rows.append(f"| {op}{'' if dom == 'ai.onnx' else ' (' + dom + ')'} | {pat} | {n} | {status} | "
                    f"{note.replace('|', '/')} |")
    supported = len(ok_patterns)
    rows.append("")
    rows.append(f"{supported} of {len(uses)} op patterns supported; "
                f"{sum(v == 'VERIFIED' for v, _ in results.values())} of {len(results)} catalogue entries VERIFIED.")
    rows.append("")
    rows.append("| catalogue entry | verdict | reason |")
    rows.append("|---|---|---|")
    for name, (v, r) in results.items():
        rows.append(f"| `{name}` | {v} | {r.replace('|', '/')} |")
    text = "\n".join(rows) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        tmpname = args.out + ".tmp"  # temp + rename: never a half-written table
        with open(tmpname, "w") as f:
            f.write(text)
        os.replace(tmpname, args.out)
    wrong = [f"{n}: {v} {r}" for n, (v, r) in results.items() if args.expect and v != args.expect]
    for w in wrong:
        print(f"census: expected {args.expect}, got {w}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
