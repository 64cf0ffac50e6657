"""The run's optimizer: AdamW over every parameter (paper §5).

The learning rate is not the optimizer's own: :func:`set_learning_rate` sets the scheduled
rate (``trainer.schedule``) before every step, so a resumed run needs nothing but the step.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer.config import TrainingConfig


def build_optimizer(model: nn.Module, training: TrainingConfig) -> torch.optim.Optimizer:
    """AdamW with ``training.optimizer``'s settings over ``model``'s parameters."""
    opt = training.optimizer
    return torch.optim.AdamW(
        model.parameters(),
        lr=training.phase1.peak_lr,  # replaced by the schedule every step
        betas=(opt.beta1, opt.beta2),
        eps=opt.eps,
        weight_decay=opt.weight_decay,
    )


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Give every parameter group the scheduled rate ``lr``."""
    for group in optimizer.param_groups:
        group["lr"] = lr
