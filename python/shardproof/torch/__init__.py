"""Capture a torch.distributed program's ranks as ONNX graphs for shardproof.

    from shardproof.torch import Case, export
    export(case, world_size=2, out="out/")  # out/reference.onnx, out/rank{r}.onnx

or, from the shell, `python3 -m shardproof.torch export FILE.py:FACTORY
--world-size P --out DIR`. See docs/pytorch.md.
"""
from .exporter import Case, Exported, export, load_factory  # noqa: F401
from .process_group import CaptureError, intercepted, simulated  # noqa: F401
from . import gradients  # noqa: F401
