"""Exponential moving average of the model weights (paper §5: decay 0.95).

After every optimizer step that was not skipped, ``ema <- decay * ema + (1 - decay) * w`` for
each parameter and floating-point buffer. The EMA copy is what is validated and exported; it
starts equal to the initial weights. It is kept in float32 whatever the training precision,
so that autocast never touches it.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class WeightEMA:
    """A float32 shadow copy of a module's weights, updated in place."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.module = copy.deepcopy(model).float().eval()
        for param in self.module.parameters():
            param.requires_grad_(False)

    def _pairs(self, model: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        shadow = dict(self.module.state_dict(keep_vars=True))
        ema_tensors, live_tensors = [], []
        for name, live in model.state_dict(keep_vars=True).items():
            if not torch.is_floating_point(live):
                continue
            ema_tensors.append(shadow[name])
            live_tensors.append(live.detach())
        return ema_tensors, live_tensors

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the shadow weights towards ``model``'s current weights."""
        ema_tensors, live_tensors = self._pairs(model)
        # lerp: ema + (1 - decay) * (w - ema), one fused pass per tensor list
        torch._foreach_lerp_(ema_tensors, [t.float() for t in live_tensors], 1.0 - self.decay)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.module.load_state_dict(state, strict=True)
