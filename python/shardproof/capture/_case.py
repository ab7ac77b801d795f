"""What a user's factory returns: how to build and feed the reference and the ranks."""
import dataclasses
from typing import Callable, Dict, List, Optional

import torch


@dataclasses.dataclass
class Case:
    """reference:      () -> nn.Module, the single-device model.
    implementation: () -> nn.Module, built once per rank under torch's fake
                    process group (dist.get_rank(), new_group, DeviceMesh work).
    inputs:         sizes -> {name: tensor}, the reference's example inputs in
                    the order of forward's parameters.
    rank_inputs:    (sizes, rank, world_size) -> {name: tensor}; default: inputs.
    dynamic:        {input name: {axis: size name}} (the ranks use it too
                    unless rank_dynamic is given); output entries are allowed
                    and ignored (output sizes follow from the graph).
    outputs:        output names (default: "y", or y0, y1, ... for a tuple).
    sizes:          one example size assignment, or world_size -> it; every
                    size at least 2. Default: distinct multiples of the world
                    size. The graph is symbolic: it holds for every size >= 2,
                    or the capture fails naming the size it depends on.
    """
    reference: Callable[[], torch.nn.Module]
    implementation: Callable[[], torch.nn.Module]
    inputs: Callable[[Dict[str, int]], Dict[str, torch.Tensor]]
    rank_inputs: Optional[Callable[[Dict[str, int], int, int], Dict[str, torch.Tensor]]] = None
    dynamic: Dict[str, Dict[int, str]] = dataclasses.field(default_factory=dict)
    rank_dynamic: Optional[Dict[str, Dict[int, str]]] = None
    outputs: Optional[List[str]] = None
    sizes: object = None
    finalize_grads: Optional[Callable[[torch.nn.Module], None]] = None
