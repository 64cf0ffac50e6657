"""Feature standardization of paper §3.1: each column by its labeled rows' statistics.

Every path of the model standardizes with these definitions: one task at a time
(:func:`standardize_features`, the packed CPU path) or a padded batch at once
(:func:`standardize_padded`, the specification and the GPU path). The two agree to float32
rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["LABELED_VALUE", "STD_FLOOR_ABSOLUTE", "STD_FLOOR_RELATIVE", "standardize_features",
           "standardize_padded"]

# Feature standardization divides by the labeled rows' population standard deviation, floored
# at STD_FLOOR_RELATIVE * |mean| + STD_FLOOR_ABSOLUTE. The relative part lies well above the
# float32 rounding of a constant column's mean (~1e-7 relative), so a column that is constant
# on the labeled rows standardizes to exactly 0 there, to ≈ 0 for unlabeled rows holding the
# same value, and saturates at ±feature_clip for unlabeled rows holding any other value: "this
# value never occurs among the labeled positives", which is the PU-relevant signal.
STD_FLOOR_RELATIVE = 1e-5
STD_FLOOR_ABSOLUTE = 1e-8

# The label scalar fed to the target encoder for labeled rows (label 1 = positive).
LABELED_VALUE = 1.0


def standardize_features(x: Tensor, n_labeled: int, clip: float) -> Tensor:
    """Standardize each column of one task ``x`` [n_rows, d] with its labeled rows' statistics.

    Mean and population standard deviation over rows ``[0, n_labeled)``, the standard
    deviation floored as described at :data:`STD_FLOOR_RELATIVE`; the result is clipped to
    ``[-clip, clip]``.
    """
    labeled = x[:n_labeled]
    var, mean = torch.var_mean(labeled, dim=0, correction=0, keepdim=True)
    scale = torch.maximum(var.sqrt(), mean.abs() * STD_FLOOR_RELATIVE + STD_FLOOR_ABSOLUTE)
    return ((x - mean) / scale).clamp(-clip, clip)


def standardize_padded(x: Tensor, n_labeled: Tensor, clip: float) -> Tensor:
    """:func:`standardize_features` for every task of a padded batch ``x`` [B, R, F] at once.

    ``n_labeled`` [B]: the labeled rows of each task are its first ``n_labeled[b]`` rows. Padded
    rows and columns get finite values (the caller never lets them reach a real output).
    """
    labeled = (torch.arange(x.shape[1], device=x.device) < n_labeled[:, None])[..., None]
    count = n_labeled.to(x.dtype)[:, None, None]
    mean = torch.where(labeled, x, 0.0).sum(dim=1, keepdim=True) / count
    var = torch.where(labeled, (x - mean) ** 2, 0.0).sum(dim=1, keepdim=True) / count
    scale = torch.maximum(var.sqrt(), mean.abs() * STD_FLOOR_RELATIVE + STD_FLOOR_ABSOLUTE)
    return ((x - mean) / scale).clamp(-clip, clip)
