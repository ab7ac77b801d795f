"""A small ONNX graph builder that writes nodes the way torch.onnx.export
(torch 1.13, opset 17) writes them for the modules in tests/models/: node
names carry the module path ("/layers.3/self_attn/q_proj/MatMul"), numbered
per scope and op type ("/layers.3/self_attn/Reshape_2"), outputs are named
"<node>_output_0", constants are Constant nodes, and shape arithmetic on
symbolic sizes goes through Shape/Gather/Unsqueeze/Concat as the exporter
emits it for `t.view(b, s, n, hd)`.

Weights are graph inputs with a shape and no data, so a 405B-parameter
model costs a few megabytes of protobuf.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INT64_MAX = 9223372036854775807
CUSTOM_DOMAINS = {"com.microsoft": 1, "shardproof": 1}


class Graph:
    """Nodes, inputs and outputs of one graph (a reference or one rank)."""

    def __init__(self, name):
        self.name = name
        self.nodes = []
        self.inputs = []
        self.outputs = []
        self.domains = set()
        self._count = {}

    # --- naming -----------------------------------------------------------
    def _name(self, scope, op):
        key = (scope, op)
        i = self._count.get(key, 0)
        self._count[key] = i + 1
        return f"{scope}/{op}" + (f"_{i}" if i else "")

    # --- inputs and outputs -----------------------------------------------
    def input(self, name, dims, dtype=TensorProto.FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, dims))
        return name

    def output(self, value, name, dims, dtype=TensorProto.FLOAT):
        """Renames the last node's output `value` to the graph output `name`
        (the exporter names graph outputs after the user's names)."""
        for n in reversed(self.nodes):
            for i, o in enumerate(n.output):
                if o == value:
                    n.output[i] = name
                    self.outputs.append(helper.make_tensor_value_info(name, dtype, dims))
                    return name
        raise ValueError(f"no node produces {value}")

    # --- nodes ------------------------------------------------------------
    def op(self, scope, op, inputs, domain="", **attrs):
        name = self._name(scope, op)
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=name, domain=domain, **attrs))
        if domain:
            self.domains.add(domain)
        return out

    def const(self, scope, value, dtype=np.int64):
        """A Constant node; a Python list gives a 1-D tensor, a number a scalar."""
        arr = np.array(value, dtype=dtype)
        t = numpy_helper.from_array(arr, name="")
        return self.op(scope, "Constant", [], value=t)

    def const_of_shape(self, scope, shape, value, dtype=np.float32):
        t = numpy_helper.from_array(np.array([value], dtype=dtype), name="")
        return self.op(scope, "ConstantOfShape", [shape], value=t)

    # --- the exporter's idioms --------------------------------------------
    def dim(self, scope, t, axis):
        """`t.shape[axis]` as a 0-d int64 tensor: Shape, Constant, Gather."""
        shape = self.op(scope, "Shape", [t])
        idx = self.const(scope, axis)
        return self.op(scope, "Gather", [shape, idx], axis=0)

    def unsqueeze0(self, scope, scalar):
        return self.op(scope, "Unsqueeze", [scalar, self.const(scope, [0])])

    def shape_of(self, scope, parts):
        """A 1-D shape from 0-d symbolic sizes (str names of tensors) and
        Python ints, as `view(b, s, n, hd)` exports: Unsqueeze the symbolic
        ones, Constant [k] the fixed ones, Concat on axis 0."""
        pieces = []
        for p in parts:
            pieces.append(self.const(scope, [p]) if isinstance(p, int) else self.unsqueeze0(scope, p))
        return self.op(scope, "Concat", pieces, axis=0)

    def view(self, scope, t, parts):
        return self.op(scope, "Reshape", [t, self.shape_of(scope, parts)], allowzero=0)

    def transpose(self, scope, t, perm):
        return self.op(scope, "Transpose", [t], perm=list(perm))

    def slice(self, scope, t, start, end, axis, end_sym=None):
        """t[start:end] on `axis`; `end_sym` (a 0-d tensor) replaces `end`."""
        starts = self.const(scope, [start])
        ends = self.unsqueeze0(scope, end_sym) if end_sym is not None else self.const(scope, [end])
        return self.op(scope, "Slice", [t, starts, ends, self.const(scope, [axis]), self.const(scope, [1])])

    def causal_mask(self, scope, s, one):
        """torch.triu(torch.full((s, s), -inf), diagonal=1)."""
        shape = self.op(scope, "Concat", [self.unsqueeze0(scope, s), self.unsqueeze0(scope, s)], axis=0)
        full = self.const_of_shape(scope, shape, -math.inf)
        return self.op(scope, "Trilu", [full, one], upper=1)

    # --- collectives ------------------------------------------------------
    def all_reduce(self, scope, t):
        return self.op(scope, "AllReduce", [t], domain="com.microsoft")

    def all_gather(self, scope, t, axis, world):
        return self.op(scope, "AllGather", [t], domain="com.microsoft", axis=axis, group_size=world)

    def reduce_scatter(self, scope, t, axis, world):
        return self.op(scope, "ReduceScatter", [t], domain="shardproof", axis=axis, group_size=world)

    # --- output -----------------------------------------------------------
    def model(self):
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs)
        opsets = [helper.make_opsetid("", OPSET)]
        opsets += [helper.make_opsetid(d, CUSTOM_DOMAINS[d]) for d in sorted(self.domains)]
        m = helper.make_model(g, opset_imports=opsets, producer_name="shardproof-genmodels")
        m.ir_version = 8
        return m

    def save(self, path):
        data = self.model().SerializeToString()
        with open(path, "wb") as f:
            f.write(data)
        return len(self.nodes)
