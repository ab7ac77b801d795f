"""An exported program's graph as the ONNX subset shardproof reads.

Every FX node of the functional core-ATen graph becomes ONNX nodes through one
row of the table in `_aten.py`; a node without a row is an error naming the
op and the user's line, never a guess. Sizes stay symbolic: a dynamic size is
a `dim_param` on the inputs, and size arithmetic (`sym_size`, `*`, `//`)
becomes Shape/Gather/Mul/Div nodes, as the prover expects. Each ONNX node is
named after its module path (`/layers/0/mlp/fc2/MatMul`) and carries the
user's line in its doc_string.
"""
import operator

import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from ..sites import node_site
from ._trace import PREFIX
from ._world import CaptureError

OPSET = 17
IR_VERSION = 8  # what Debian's libonnx 1.12 (the C++ core) reads
CUSTOM_DOMAINS = {"com.microsoft": 1, "shardproof": 1}

DTYPES = {torch.float32: TensorProto.FLOAT, torch.float64: TensorProto.DOUBLE, torch.float16: TensorProto.FLOAT16,
          torch.bfloat16: TensorProto.BFLOAT16, torch.int64: TensorProto.INT64, torch.int32: TensorProto.INT32,
          torch.int16: TensorProto.INT16, torch.int8: TensorProto.INT8, torch.uint8: TensorProto.UINT8,
          torch.bool: TensorProto.BOOL}


# A complex tensor is written as its real view: a trailing axis of 2 (_complex.py).
COMPLEX_PARTS = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def onnx_dtype(dtype, where=""):
    dtype = COMPLEX_PARTS.get(dtype, dtype)
    if dtype not in DTYPES:
        raise CaptureError(f"{where}: dtype {dtype} has no ONNX counterpart shardproof reads")
    return DTYPES[dtype]


class Writer:
    """Builds one ONNX graph; the op rows call `emit`, `const` and `ints`."""

    def __init__(self, what, symbols):
        self.what = what
        self.symbols = symbols  # sympy symbol -> size name
        self.nodes, self.initializers = [], []
        self.values = {}  # fx.Node -> ONNX name, list of names, or a Python number
        self.sources = {}  # sympy symbol of a dynamic size -> (input name, axis)
        self.reshaped = {}  # a Reshape's output -> (its source, the source's FX shape)
        self.assumptions = []  # torch's guards on sizes, as spec conditions
        self._names = set()
        self._scope, self._site, self._fx = "", "", None

    # --- naming -----------------------------------------------------------
    def fresh(self, base):
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def at(self, fx_node):
        """Nodes emitted next belong to `fx_node`: its module path and line."""
        self._fx = fx_node
        self._scope = module_scope(fx_node)
        self._site = node_site(fx_node.meta.get("stack_trace"))
        if self._site and fx_node.meta.get("autograd_backward"):
            self._site = "gradient of " + self._site

    # --- building ---------------------------------------------------------
    def emit(self, op_type, inputs, n_out=1, domain="", **attrs):
        """Appends one node; returns its output name (or names when n_out > 1)."""
        name = self.fresh(f"{self._scope}/{op_type}")
        outs = [self.fresh(f"{name}_output_{i}") for i in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outs, name=name, domain=domain,
                                **{k: v for k, v in attrs.items() if v is not None})
        if self._site:
            node.doc_string = self._site
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype):
        """A constant tensor (a Python number, list, or torch tensor)."""
        t = value.detach() if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        if dtype is not None and t.dtype != dtype:
            t = t.to(dtype)
        if t.is_complex():
            t = torch.view_as_real(t)
        proto = numpy_helper.from_array(t.cpu().numpy() if t.dtype != torch.bfloat16 else t.float().numpy())
        return self.emit("Constant", [], value=proto)

    def filled(self, size, value, dtype):
        """A tensor of `size` (ints or symbolic sizes) holding `value` everywhere."""
        fill = numpy_helper.from_array(torch.tensor([value], dtype=dtype).numpy())
        return self.emit("ConstantOfShape", [self.ints(size)], value=fill)

    def scalar(self, v, like_dtype=torch.int64):
        """An int64 scalar from a Python int, a size node or a SymInt."""
        if isinstance(v, torch.fx.Node):
            return self.value(v)
        if isinstance(v, torch.SymInt):
            return self.sym(v.node.expr)
        if isinstance(v, bool) or not isinstance(v, int):
            raise CaptureError(f"{self.where()}: expected an integer size, got {v!r}")
        return self.const(v, like_dtype)

    def cast(self, v, dtype):
        return v if dtype == torch.int64 else self.emit("Cast", [v], to=onnx_dtype(dtype))

    def ints(self, items):
        """A 1-D int64 tensor of sizes, some of them symbolic."""
        items = list(items)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return self.const(items, torch.int64)
        zero = self.const([0], torch.int64)
        parts = [self.const([v], torch.int64) if isinstance(v, int) and not isinstance(v, bool)
                 else self.emit("Unsqueeze", [self.scalar(v), zero])
                 for v in items]
        return parts[0] if len(parts) == 1 else self.emit("Concat", parts, axis=0)

    def sym(self, expr):
        """A size expression over the inputs' dynamic sizes, as shape arithmetic."""
        import sympy

        if expr in self.sources:
            name, axis = self.sources[expr]
            return self.emit("Gather", [self.emit("Shape", [name]), self.const(axis, torch.int64)], axis=0)
        if isinstance(expr, sympy.Integer):
            return self.const(int(expr), torch.int64)
        ops = {sympy.Add: "Add", sympy.Mul: "Mul"}
        name = type(expr).__name__
        if type(expr) in ops:
            args = [self.sym(a) for a in expr.args]
            out = args[0]
            for a in args[1:]:
                out = self.emit(ops[type(expr)], [out, a])
            return out
        if name in ("FloorDiv", "Mod", "PythonMod") and len(expr.args) == 2:
            return self.emit("Div" if name == "FloorDiv" else "Mod", [self.sym(a) for a in expr.args])
        raise CaptureError(f"{self.where()}: the size {expr} cannot be written as shape arithmetic yet")

    def condition(self, arg):
        """A size condition (an FX node of a SymBool, or a bool) as spec text."""
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
        if isinstance(val, bool):
            return "0 == 0" if val else "0 == 1"
        return spec_text(val.node.expr, self.symbols, self.where)

    def value(self, arg):
        v = self.values.get(arg)
        if v is None:
            raise CaptureError(f"{self.where()}: internal: no value for {arg}")
        return v

    def where(self):
        n = self._fx
        desc = f"{n.target}" if n is not None else "?"
        return f"the {self.what}'s {desc}" + (f" at {self._site}" if self._site else "")


def module_scope(fx_node):
    stack = fx_node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    path = path[len(PREFIX):] if path.startswith(PREFIX) else ("" if path == PREFIX[:-1] else path)
    return "".join("/" + p for p in path.split(".") if p)


def _value_info(name, val, dims_of):
    if not isinstance(val, torch.Tensor):
        return helper.make_tensor_value_info(name, TensorProto.INT64, [])
    return helper.make_tensor_value_info(name, onnx_dtype(val.dtype, name),
                                         dims_of(val) + ([2] if val.is_complex() else []))


def write(traced, what, output_names, rows):
    """The ONNX model of `traced`; `rows` maps ATen ops to converters."""
    gm = traced.graph_module
    symbols = traced.symbols
    w = Writer(what, symbols)

    def dims(val):
        return [d if isinstance(d, int) else symbols.get(d.node.expr) for d in val.shape]

    inputs, outputs = [], []
    for node in gm.graph.nodes:
        w.at(node)
        if node.op == "placeholder":
            val = node.meta.get("val")
            name = traced.placeholders.get(node.name)
            if isinstance(name, torch.Tensor):
                w.values[node] = w.const(name, name.dtype)
                continue
            if name is None or not isinstance(val, torch.Tensor):
                raise CaptureError(f"the {what} takes a non-tensor input '{node.name}' ({val!r}); pass sizes as "
                                   "tensors or build them into the module")
            w.values[node] = name
            for axis, d in enumerate(val.shape):
                if not isinstance(d, int) and d.node.expr in symbols:
                    w.sources.setdefault(d.node.expr, (name, axis))
            inputs.append(_value_info(name, val, dims))
        elif node.op == "get_attr":
            c = getattr(gm, node.target)
            w.values[node] = w.const(c, c.dtype)
        elif node.op == "call_function":
            convert(w, node, rows)
        elif node.op == "output":
            results = node.args[0]
            if len(results) != len(output_names):
                raise CaptureError(f"the {what} returns {len(results)} outputs, named {output_names}")
            for res, name in zip(results, output_names):
                src = w.value(res) if isinstance(res, torch.fx.Node) else w.const(res, None)
                w.nodes.append(helper.make_node("Identity", [src], [name], name=w.fresh(f"/output/{name}")))
                outputs.append(_value_info(name, res.meta.get("val"), dims))
        else:
            raise CaptureError(f"the {what}'s graph has a {node.op} node ({node.target}), which shardproof does not read")
    graph = helper.make_graph(w.nodes, what, inputs, outputs, initializer=w.initializers)
    opsets = [helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, v) for d, v in CUSTOM_DOMAINS.items()]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="shardproof.capture")
    model.ir_version = IR_VERSION
    return model, traced.guards + w.assumptions


# Python operators on sizes (torch.export writes `s0 * s1` as operator.mul).
_SYM = {operator.mul: "Mul", operator.add: "Add", operator.sub: "Sub", operator.floordiv: "Div",
        operator.mod: "Mod"}


def convert(w, node, rows):
    target = node.target
    if isinstance(node.meta.get("val"), torch.SymBool):
        w.values[node] = node.meta["val"]  # a condition on sizes: read by the assertion that uses it
        return
    if target is operator.getitem:
        seq, i = node.args
        w.values[node] = w.value(seq)[i]
        return
    if target in _SYM:
        # Sizes are never negative, so ONNX's truncating Div is Python's //.
        a, b = (w.scalar(x) for x in node.args)
        w.values[node] = w.emit(_SYM[target], [a, b])
        return
    if target is torch.ops.aten._assert_scalar.default:
        w.assumptions.append(w.condition(node.args[0]))
        return
    if target is torch.ops.aten.sym_size.int:
        x, axis = node.args
        shape = w.emit("Shape", [w.value(x)])
        w.values[node] = w.emit("Gather", [shape, w.const(axis, torch.int64)], axis=0)
        return
    from . import _complex

    row = (_complex.ROWS if _complex.is_complex(node) else rows).get(target)
    if row is None and _complex.is_complex(node):
        raise CaptureError(f"the {w.what} uses {target} on complex values" + (f" at {w._site}" if w._site else "") +
                           ", which shardproof cannot translate yet (complex products, views and slices it can)")
    if row is None:
        raise CaptureError(f"the {w.what} uses {target}" + (f" at {w._site}" if w._site else "") +
                           ", which shardproof cannot translate yet (docs/pytorch.md lists the supported ops)")
    w.values[node] = row(w, node, *node.args, **node.kwargs)


def spec_text(expr, symbols, where):
    """A sympy condition or size over the dynamic sizes in the spec's syntax
    (docs/spec-format.md); a symbol that is no input size is an error."""
    import sympy

    def go(e):
        if e in symbols:
            return symbols[e]
        if isinstance(e, sympy.Symbol):
            raise CaptureError(f"{where()}: torch's guard {expr} names {e}, which is no input size")
        if isinstance(e, sympy.Integer):
            return str(int(e))
        if e is sympy.true or e is sympy.false:
            return "0 == 0" if e is sympy.true else "0 == 1"
        name = type(e).__name__
        binary = {"Add": " + ", "Mul": " * ", "FloorDiv": " // ", "Mod": " % ", "PythonMod": " % ",
                  "Equality": " == ", "Unequality": " != ", "StrictLessThan": " < ", "LessThan": " <= ",
                  "StrictGreaterThan": " > ", "GreaterThan": " >= ", "And": " and ", "Or": " or "}
        if name in binary:
            return "(" + binary[name].join(go(a) for a in e.args) + ")"
        if name == "Not":
            return "not " + go(e.args[0])
        raise CaptureError(f"{where()}: torch's guard {expr} uses {name}, which shardproof cannot state yet")

    return go(expr)
