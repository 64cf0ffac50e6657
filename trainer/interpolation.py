"""``trainer interpolate A B --weight T``: the weights (1 − T)·A + T·B of two exported models.

A fine-tuned model and the model it started from usually lie in one basin, and the straight
line between them trades what the fine-tuning gained against what it moved. Wortsman et al.
(CVPR 2022, "Robust fine-tuning of zero-shot models", WiSE-FT) interpolate this way;
docs/recipe.md measures it between puicl-v1 and its benchmark-sized fine-tuning stage.

Both files must hold the same model configuration: an interpolation between different shapes
or hyper-parameters has no meaning, so it is refused with both configurations named. Each
tensor is mixed in float64 and rounded once, when stored as float32.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from puicl_model.net.model import PUICLModel


def interpolate_weights(first: str | Path, second: str | Path, weight: float) -> PUICLModel:
    """A ``PUICLModel`` holding (1 − weight)·first + weight·second (exported weights)."""
    from puicl_model.net.weights import load_weights

    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"--weight must lie in [0, 1] (0 gives the first model), got {weight}")
    start, end = load_weights(first), load_weights(second)
    if start.config != end.config:
        raise ValueError(
            f"{first} and {second} hold different models and cannot be interpolated: "
            f"{start.config.to_mapping()} against {end.config.to_mapping()}"
        )
    end_state = end.state_dict()
    mixed = {}
    for name, tensor in start.state_dict().items():
        if not torch.is_floating_point(tensor):
            mixed[name] = tensor
            continue
        total = (1.0 - weight) * tensor.double() + weight * end_state[name].double()
        mixed[name] = total.to(tensor.dtype)
    start.load_state_dict(mixed)
    return start
