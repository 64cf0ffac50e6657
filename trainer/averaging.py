"""``training.average: last_checkpoints``: the mean of a run's newest checkpoints' raw weights.

The modded-nanoTabPFN speedrun (record 7, with weight decay 0.01) exports the average of the
last checkpoints' weights instead of an EMA. We average the *raw* (optimizer) weights, as it
does, not the EMA copies: an average of EMAs would smooth twice, and its horizon would depend
on both ``ema_decay`` and the checkpoint spacing.

Which checkpoints: the ``average_last`` newest ones of the run's index at or before the
exported step, in step order -- so the spacing is ``checkpoint_every``, plus any checkpoint a
segment wrote when it ended early (a signal or the time limit). All of them must verify and
share the exported checkpoint's training hash; fewer than ``average_last`` is an error, never
a silent average of fewer.

The mean is deterministic: per tensor, a float32 sum in step order (oldest first), divided
by the count. Tensors that are not floating point (none today) are taken from the newest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainer.checkpoint import CheckpointError, CheckpointStore


def checkpoints_to_average(
    store: CheckpointStore, step: int, count: int
) -> list[tuple[Path, dict[str, Any]]]:
    """The ``count`` newest checkpoints at or before ``step``, oldest first, loaded."""
    entries = [e for e in store.entries() if e["step"] <= step]
    if len(entries) < count:
        steps = [e["step"] for e in entries]
        raise CheckpointError(
            f"training.average_last is {count} but {store.directory} holds only "
            f"{len(entries)} checkpoint(s) up to step {step} ({steps}); export a later --step "
            "or train until enough checkpoints exist"
        )
    chosen = []
    for entry in entries[-count:]:
        path = store.directory / entry["file"]
        chosen.append((path, store.load(path)))
    return chosen


def mean_weights(payloads: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """The mean of the payloads' ``model`` weights (float32 sum in list order / count)."""
    if not payloads:
        raise ValueError("no checkpoints to average")
    hashes = {p["training_hash"] for p in payloads}
    if len(hashes) != 1:
        raise CheckpointError(
            "the checkpoints to average were trained with different configurations "
            f"({len(hashes)} training hashes); they are not one run"
        )
    newest = payloads[-1]["model"]
    mean = {}
    for name, tensor in newest.items():
        if not torch.is_floating_point(tensor):
            mean[name] = tensor.clone()
            continue
        total = torch.zeros(tensor.shape, dtype=torch.float32)
        for payload in payloads:
            total += payload["model"][name].to(torch.float32)
        mean[name] = (total / len(payloads)).to(tensor.dtype)
    return mean
