"""The backward of softmax and log-softmax, kept whole rather than decomposed.

torch's formulas, exactly: for y = log_softmax(x), dx = g - exp(y) * sum(g);
for y = softmax(x), dx = y * (g - sum(g * y)), sums along the softmax's axis.
When y is the graph's own log_softmax(x), exp(y) is written softmax(x): equal
over the reals, and the form a vocab-parallel cross-entropy's saved softmax
(exp(x - max) / sum) is compared with by the prover's softmax-shift rule.
"""
import torch

from ._aten import axis, rank_of, row

aten = torch.ops.aten


def _sum_along(w, x, a):
    return w.emit("ReduceSum", [x, w.const([a], torch.int64)], keepdims=1)


def _through_aliases(node):
    while node.op == "call_function" and node.target in (aten.alias.default, aten.detach.default):
        node = node.args[0]
    return node


@row(aten._log_softmax_backward_data.default)
def _log_softmax_backward(w, node, grad, output, dim, input_dtype):
    a = axis(dim, rank_of(output))
    source = _through_aliases(output)
    if source.op == "call_function" and source.target == aten._log_softmax.default \
            and axis(source.args[1], rank_of(source)) == a:
        probs = w.emit("Softmax", [w.value(source.args[0])], axis=a)
    else:
        probs = w.emit("Exp", [w.value(output)])
    return w.emit("Sub", [w.value(grad), w.emit("Mul", [probs, _sum_along(w, w.value(grad), a)])])


@row(aten._softmax_backward_data.default)
def _softmax_backward(w, node, grad, output, dim, input_dtype):
    a = axis(dim, rank_of(output))
    y, g = w.value(output), w.value(grad)
    inner = w.emit("Sub", [g, _sum_along(w, w.emit("Mul", [g, y]), a)])
    return w.emit("Mul", [y, inner])
