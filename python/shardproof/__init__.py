"""shardproof's Python side: capture what a torch.distributed program computes on
every rank as ONNX graphs the C++ prover reads (see docs/pytorch.md)."""

__version__ = "0.1.0"

from .case import Case, load_factory  # noqa: F401,E402
from .errors import CaptureError  # noqa: F401,E402
