"""torch's TorchScript -> ONNX conversion (dynamo=False) in pieces, in linear time.

torch._C._jit_pass_onnx converts node by node and hands the symbolic function
of each node the whole value map built so far (`env`), copied into a Python
dict at every call: converting N nodes costs O(N^2) (measured with torch
1.13; 2.13's _run_symbolic_function still takes the map). A training step of
a deep model has tens of thousands of nodes (an 8-layer Llama step at TP8 did not
finish in 50 minutes). This module converts the graph in consecutive chunks of
at most CHUNK nodes, each an ordinary call of the original pass on a small
graph, and stitches the converted chunks into one graph.

What a chunk sees matches what the whole-graph pass would have given the same
nodes:
- a value made by an earlier chunk enters as a graph input carrying the
  *converted* value's type (the symbolic shapes ONNX shape inference gave it);
- a value that is not a tensor (a list, None, a number) or a TorchScript
  constant is not passed across: its producer is cloned into the chunk, so
  the symbolic functions that look at their inputs' producers (constant
  shapes, list constructions) see the same nodes.
A graph the chunking cannot handle (a piece whose conversion fails or changes
its outputs) is converted whole, so an export error reads as without pieces.
tests: python/tests/test_chunked.py compares chunked and whole conversions.
"""
import contextlib
import os

import torch

_C = torch._C
# Nodes per chunk: the quadratic part of a chunk stays small while the
# per-call overhead (clearing the constant map, the chunk's own inputs) stays
# negligible. SHARDPROOF_ONNX_CHUNK=0 converts whole graphs (for comparison).
CHUNK = int(os.environ.get("SHARDPROOF_ONNX_CHUNK", "400"))


def _is_tensor(v):
    return isinstance(v.type(), _C.TensorType)


def _must_clone(v):
    """A value a chunk recomputes instead of receiving: non-tensors and constants."""
    return not _is_tensor(v) or v.node().kind() == "prim::Constant"


class _Unchunkable(Exception):
    pass


def _top(node):
    """The top-level node of the graph that holds `node` (itself, or the
    node whose sub-block it is in)."""
    while True:
        owner = node.owningBlock().owningNode()
        if owner is None:
            return node
        node = owner


def _chunks(nodes, size):
    return [nodes[i:i + size] for i in range(0, len(nodes), size)]


def _build_piece(nodes, converted):
    """A TorchScript graph holding `nodes` (and clones of the non-tensor
    producers they read). Values from outside are inputs typed like their
    converted counterparts. Returns (graph, [original input values],
    [original output values])."""
    g = _C.Graph()
    local = {}  # original value -> value in g
    inputs = []
    members = set(nodes)

    def value(v):
        if v in local:
            return local[v]
        p = v.node()
        if p.kind() != "prim::Param" and p not in members and _must_clone(v):
            clone_node(p)
            return local[v]
        if p in members:
            raise _Unchunkable(f"{p.kind()} read before it is made")
        if v not in converted:
            raise _Unchunkable(f"value {v.debugName()} has no converted counterpart")
        i = g.addInput()
        i.copyMetadata(converted[v])
        local[v] = i
        inputs.append(v)
        return i

    def clone_node(n):
        # Sub-blocks (autograd.Function bodies) are cloned with the node;
        # the outer values they read come through `value` too.
        c = g.createClone(n, value)
        g.appendNode(c)
        for o, co in zip(n.outputs(), c.outputs()):
            local[o] = co

    for n in nodes:
        clone_node(n)
    # A value leaves the piece if a later piece reads it, directly or through
    # a non-tensor it feeds (a list of tensors, or x.size(1), read pieces
    # later: that piece rebuilds the list or the size from the tensors, so
    # they must leave this one).
    recomputed = {}

    def read_later(node):
        if node not in members:
            return True
        if node not in recomputed:
            recomputed[node] = False  # memo, set before the recursion into its users
            recomputed[node] = any(_must_clone(o) and any(read_later(_top(u.user)) for u in o.uses())
                                   for o in node.outputs())
        return recomputed[node]

    outputs = []
    for n in nodes:
        for o in n.outputs():
            users = [_top(u.user) for u in o.uses()]
            if any(u not in members for u in users) or (not _must_clone(o) and any(map(read_later, users))):
                g.registerOutput(local[o])
                outputs.append(o)
    return g, inputs, outputs


def convert(graph, export_type, original, size=None):
    size = CHUNK if size is None else size
    nodes = list(graph.nodes())
    if size <= 0 or len(nodes) <= size:
        return original(graph, export_type)
    try:
        pieces = []
        converted = {}  # original value -> value in the piece's converted graph
        # Graph inputs: a piece that reads them receives them typed as
        # ToONNX would copy them.
        for i in graph.inputs():
            converted[i] = i
        for chunk in _chunks(nodes, size):
            g, ins, outs = _build_piece(chunk, converted)
            onnx_g = original(g, export_type)
            got = list(onnx_g.outputs())
            if len(got) != len(outs):
                raise _Unchunkable("a piece's conversion changed its outputs")
            for o, c in zip(outs, got):
                converted[o] = c
            pieces.append((onnx_g, ins, outs))
    except Exception:  # noqa: BLE001 - whatever fails in pieces, the whole pass decides (and reports)
        return original(graph, export_type)
    return _stitch(graph, pieces)


def _stitch(graph, pieces):
    out = _C.Graph()
    final = {}  # original value -> value in `out`
    for i in graph.inputs():
        n = out.addInput()
        n.copyMetadata(i)
        final[i] = n
    for onnx_g, ins, outs in pieces:
        local = {pi: final[v] for pi, v in zip(onnx_g.inputs(), ins)}

        def value(v):
            return local[v]

        for n in onnx_g.nodes():
            c = out.createClone(n, value)
            out.appendNode(c)
            for o, co in zip(n.outputs(), c.outputs()):
                local[o] = co
        for v, c in zip(outs, onnx_g.outputs()):
            final[v] = local[c]
    for o in graph.outputs():
        out.registerOutput(final[o])
    return out


def _graph_is_large(graph):
    return CHUNK > 0 and len(list(graph.nodes())) > CHUNK


@contextlib.contextmanager
def linear_onnx_pass():
    """Within the block, torch.onnx.export runs in time linear in the graph:
    - the conversion is done in chunks (above);
    - on a graph of more than CHUNK nodes, two whole-graph passes are skipped,
      each quadratic in torch 1.13 (at 16 Llama layers they took 19 s and 6 s
      of a 73 s export, twelve and fourteen times their cost at 4 layers):
      * the ONNX shape inference rerun over the converted graph: each chunk's
        conversion already ran it node by node. The rerun and the pieces
        each know a few static dimensions the other does not (of gradient
        outputs; the test checks they agree where both know one), and the
        checker infers every shape itself (a declared dimension only adds a
        check). The training fixtures export the same files with and
        without it;
      * _jit_pass_lint, a consistency check of torch's own passes (the
        exported model is checked by onnx.checker before it is written).
    SHARDPROOF_ONNX_CHUNK=0 runs torch's export unchanged."""
    saved = (_C._jit_pass_onnx, _C._jit_pass_onnx_graph_shape_type_inference, _C._jit_pass_lint)
    original, infer, lint = saved

    def chunked(graph, export_type):
        return convert(graph, export_type, original)

    def infer_small(graph, *args):
        if not _graph_is_large(graph):
            infer(graph, *args)

    def lint_small(graph):
        if not _graph_is_large(graph):
            lint(graph)

    # torch keeps the dimension names of shape inference in one process-wide
    # map, searched linearly for each inferred dimension and cleared only by
    # the skipped whole-graph rerun (run here on an empty graph): cleared at
    # each export, it holds one graph's names instead of every export's so far.
    infer(_C.Graph(), {}, 17)  # an empty graph: the opset is not read
    _C._jit_pass_onnx = chunked
    _C._jit_pass_onnx_graph_shape_type_inference = infer_small
    _C._jit_pass_lint = lint_small
    try:
        yield
    finally:
        _C._jit_pass_onnx, _C._jit_pass_onnx_graph_shape_type_inference, _C._jit_pass_lint = saved
