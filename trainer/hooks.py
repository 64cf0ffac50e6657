"""The hook point of a training step: where tests inject faults from outside.

A training step (``trainer.step``) asks :func:`hook_for` for the hook of its step and rank and
calls it at four points. With nothing installed that is :data:`NO_HOOK`, whose methods change
nothing, so a normal run computes exactly what it would without the hook point. Tests install
a factory of hooks (:func:`install`, or :func:`installed` as a context manager); the trainer
installs ``trainer.faults``'s when ``PUICL_TRAINER_FAULTS`` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch


class StepHook:
    """What a hook may do at the points of one step, in this order; this base does nothing."""

    def step_begins(self) -> None:
        """Before the step reads anything (a signal sent here is seen by this step)."""

    def micro_batch_losses(self, index: int, losses: torch.Tensor) -> torch.Tensor:
        """The per-task losses of micro-batch ``index``, before its backward pass."""
        return losses

    def loss_sum(self, total: torch.Tensor) -> torch.Tensor:
        """This rank's loss sum after every backward pass, before the step's all-reduce."""
        return total

    def backward_done(self) -> None:
        """After the backward passes, before clipping and the optimizer step."""


NO_HOOK = StepHook()

# (global step, rank) -> the hook of that step on that rank
HookFactory = Callable[[int, int], StepHook]

_factory: HookFactory | None = None


def hook_for(global_step: int, rank: int) -> StepHook:
    """The installed hook of ``global_step`` on ``rank``; :data:`NO_HOOK` when none is."""
    return NO_HOOK if _factory is None else _factory(global_step, rank)


def install(factory: HookFactory | None) -> None:
    """Make ``factory`` give every step's hook (``None``: no hook)."""
    global _factory
    _factory = factory


@contextlib.contextmanager
def installed(factory: HookFactory | None) -> Iterator[None]:
    """``factory`` installed for the ``with`` block; what was installed before comes back."""
    previous = _factory
    install(factory)
    try:
        yield
    finally:
        install(previous)
