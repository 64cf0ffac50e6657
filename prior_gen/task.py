"""One PU task as the generator writes it and the shard reader returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Task"]


@dataclass
class Task:
    """A PU task (docs/architecture.md §3).

    ``x`` float32 [n_rows, n_features]: rows ``[0, n_labeled)`` are the labeled positives, the
    remaining rows the unlabeled pool in random order. ``y`` int8 [n_rows]: the true labels
    (1 = positive, 0 = negative; 1 on every labeled row). ``meta`` holds the task's factors and
    provenance (stage, index, step, pi, eta, realized_pi, causal, depth, width, seed_key, ...).
    """

    x: np.ndarray
    y: np.ndarray
    n_labeled: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return int(self.x.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def n_unlabeled(self) -> int:
        return self.n_rows - self.n_labeled
