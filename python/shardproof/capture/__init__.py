"""Capture on torch 2: torch.export under torch's fake process group.

    from shardproof.capture import Case, export
    export(case, world_size=2, out="out/")  # out/reference.onnx, out/rank{r}.onnx

Each graph is torch.export's functional core-ATen graph at symbolic sizes,
written as the ONNX subset the prover reads. See docs/pytorch.md.
"""
from ..case import Case  # noqa: F401
from ._export import Exported, export  # noqa: F401
from ._world import CaptureError  # noqa: F401
