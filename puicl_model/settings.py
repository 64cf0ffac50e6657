"""The classifier's inference settings: their defaults and limits, written once.

``PUICLClassifier``'s signature, ``puicl predict``'s options and the benchmark adapter's
``puicl:`` settings all read them from :class:`InferenceSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from puicl_common.configio import require

__all__ = ["InferenceSettings"]


@dataclass(frozen=True)
class InferenceSettings:
    """How a fitted table is split into forward passes (:mod:`puicl_model.inference`).

    The one place these defaults and their limits are written: ``PUICLClassifier``'s
    signature, ``puicl predict``'s options and the benchmark adapter's ``puicl:`` settings all
    read them from here."""

    n_estimators: int | None = None
    single_pass_limit: int = 1024
    chunk_size: int = 200
    max_labeled: int = 300

    # the least value of each setting: a chunk must hold two labeled rows and two pool rows
    MINIMUM: ClassVar[dict[str, int]] = {
        "n_estimators": 1, "single_pass_limit": 1, "chunk_size": 4, "max_labeled": 2,
    }

    # the most of a setting that has a limit. Ensemble members repeat the few of
    # ensemble.MEMBERS with fresh draws, each costing about one more single pass: beyond a few
    # dozen they add time, not accuracy, and a count such as 10**9 is a typo whose plan alone
    # would fill memory before the first forward pass
    MAXIMUM: ClassVar[dict[str, int]] = {"n_estimators": 100}

    def validate(self) -> None:
        for name, minimum in self.MINIMUM.items():
            value = getattr(self, name)
            if value is None and name == "n_estimators":
                continue
            is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            require(is_int and value >= minimum, name,
                    f"must be an integer >= {minimum}, got {value!r}")
            maximum = self.MAXIMUM.get(name)
            require(maximum is None or value <= maximum, name,
                    f"must be an integer from {minimum} to {maximum}, got {value!r}")
