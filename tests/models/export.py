"""Exporting a module to ONNX the way users do, plus the fixes the notes call
for: custom domains declared in opset_import, value_info of custom-op outputs
dropped (the exporter writes wrong shapes there)."""
import io
import warnings

import onnx
import torch

from collectives import CUSTOM_DOMAINS

OPSET = 17


def export(module, args, input_names, output_names, dynamic_axes, path):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=OPSET, do_constant_folding=True,
                          dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    used = {n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")}
    have = {o.domain for o in model.opset_import}
    for d in sorted(used - have):
        model.opset_import.append(onnx.helper.make_opsetid(d, CUSTOM_DOMAINS.get(d, 1)))
    custom_outputs = {o for n in model.graph.node if n.domain in used for o in n.output}
    keep = [vi for vi in model.graph.value_info if vi.name not in custom_outputs]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)
    data = model.SerializeToString()
    # Only rewrite when the bytes change, so build systems see stable files.
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    with open(path, "wb") as f:
        f.write(data)
