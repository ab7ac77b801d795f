"""Small helpers over ONNX graphs for the mutation suite: who produces and who
consumes a value, which nodes reach an output, which values are constants or
pure size arithmetic, and in-place edits that keep the node list in
topological order."""

import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "AllToAll")
# A bound this large is ONNX's "to the end" (INT64_MAX, INT32_MAX, ...), not a
# position: shifting it by one changes nothing for any real tensor.
SENTINEL = 1 << 31


def clone(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def node_label(node):
    return node.name or node.output[0]


def is_collective(node):
    return node.domain in ("com.microsoft", "shardproof") and node.op_type in COLLECTIVES


def collectives(graph):
    return [i for i, n in enumerate(graph.node) if is_collective(n)]


def producers(graph):
    out = {}
    for i, n in enumerate(graph.node):
        for o in n.output:
            if o:
                out[o] = i
    return out


def live_nodes(graph):
    """Indices of the nodes some graph output depends on."""
    prod = producers(graph)
    live, todo = set(), [o.name for o in graph.output]
    while todo:
        v = todo.pop()
        i = prod.get(v)
        if i is None or i in live:
            continue
        live.add(i)
        todo.extend(x for x in graph.node[i].input if x)
    return live


def pattern_matches(pattern, name):
    """Spec input names may contain '*' (any run of characters)."""
    rx = ".*".join(re.escape(p) for p in pattern.split("*"))
    return re.fullmatch(rx, name) is not None


def placed_names(spec, graph):
    """Graph inputs and initializers the spec places (their values are free
    leaves of the proof, not constants)."""
    inputs = spec.get("inputs", {})
    renamed = set()
    for key, p in inputs.items():
        if isinstance(p, dict) and "as" in p:
            renamed.add(str(p["as"]))
    names = [i.name for i in graph.input] + [i.name for i in graph.initializer]
    out = set()
    for n in names:
        if n in renamed or any(pattern_matches(k, n) for k in inputs):
            out.add(n)
    return out


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def set_attr(node, name, value):
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value))


def const_value(graph, name):
    """The numpy value of a Constant node's output or an initializer, else None."""
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            v = attr(n, "value")
            if v is not None:
                return numpy_helper.to_array(v)
            for key, dt in (("value_float", np.float32), ("value_int", np.int64),
                            ("value_floats", np.float32), ("value_ints", np.int64)):
                x = attr(n, key)
                if x is not None:
                    return np.array(x, dtype=dt)
            return None
    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    return None


def static_values(graph, placed):
    """Names whose value depends on sizes only (Shape, constants, unplaced
    initializers and arithmetic over them), not on any tensor's data."""
    static = {t.name for t in graph.initializer if t.name not in placed}
    for n in graph.node:
        ins = [x for x in n.input if x]
        if n.op_type in ("Constant", "Shape") or all(x in static for x in ins):
            static.update(o for o in n.output if o)
    return static


class Editor:
    """In-place edits of one graph; new names are unique and new nodes are
    inserted where the topological order stays valid."""

    def __init__(self, model):
        self.model = model
        self.graph = model.graph
        self.count = 0

    def fresh(self, stem):
        self.count += 1
        return "mut_%s_%d" % (stem, self.count)

    def index_of(self, node):
        # By output name, not object identity (protobuf wrappers need not be
        # the same Python object twice); a node's first output is unique.
        for i, n in enumerate(self.graph.node):
            if n.output[0] == node.output[0]:
                return i
        raise KeyError(node_label(node))

    def insert(self, at, node):
        self.graph.node.insert(at, node)
        return self.graph.node[at]

    def const_input(self, node, slot, array):
        """Feed input `slot` of `node` from a new Constant holding `array`
        (the old constant may be shared with other nodes: it is left alone)."""
        name = self.fresh("const")
        c = helper.make_node("Constant", [], [name], name=name,
                             value=numpy_helper.from_array(np.asarray(array), name))
        where = self.index_of(node)
        node.input[slot] = name
        self.insert(where, c)

    def wrap_output(self, node, slot, make):
        """Route output `slot` of `node` through new nodes: `make(src, dst)`
        returns the nodes computing the old name `dst` from `src`."""
        at = self.index_of(node) + 1
        dst = node.output[slot]
        src = self.fresh("pre")
        node.output[slot] = src
        for k, n in enumerate(make(src, dst)):
            self.insert(at + k, n)

    def replace(self, node, op_type, inputs, outputs=None, domain="", **attrs):
        """Turn `node` into another operator in place (same position)."""
        node.op_type = op_type
        node.domain = domain
        del node.input[:]
        node.input.extend(inputs)
        if outputs is not None:
            del node.output[:]
            node.output.extend(outputs)
        del node.attribute[:]
        for k, v in attrs.items():
            node.attribute.append(helper.make_attribute(k, v))

    def elem_type(self, name, default=onnx.TensorProto.FLOAT):
        for vi in list(self.graph.output) + list(self.graph.value_info) + list(self.graph.input):
            if vi.name == name and vi.type.tensor_type.elem_type:
                return vi.type.tensor_type.elem_type
        return default


def scalar_like(elem_type, value):
    dt = onnx.helper.tensor_dtype_to_np_dtype(elem_type) if hasattr(
        onnx.helper, "tensor_dtype_to_np_dtype") else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]
    return np.array(value, dtype=dt)


def strip_placed_data(model, placed):
    """The model with the data of spec-placed initializers dropped: two rank
    graphs equal after this compute the same function of their inputs."""
    m = clone(model)
    for t in m.graph.initializer:
        if t.name in placed:
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.ClearField("int64_data")
            t.ClearField("int32_data")
            t.ClearField("double_data")
    m.ClearField("doc_string")
    m.graph.ClearField("doc_string")
    m.graph.ClearField("name")  # "implementation on rank 1": a label, not the program
    return m.SerializeToString()
