"""The classifier's inference settings: their defaults and limits, written once.

``PUICLClassifier``'s signature, ``puicl predict``'s options and the benchmark adapter's
``puicl:`` settings all read them from :class:`InferenceSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

import numpy as np

from puicl_common.configio import identity_dict, require

__all__ = ["InferenceSettings", "LargePool", "Partner", "PortfolioChoice"]

PortfolioChoice = Literal["auto", "none"]
Partner = PortfolioChoice  # the setting's former name
LargePool = Literal["chunks", "shared"]


@dataclass(frozen=True)
class InferenceSettings:
    """How the classifier splits a fitted table into forward passes
    (:mod:`puicl_model.passes.planning`) and whether a portfolio of learners runs beside the model.

    The one place these defaults and their limits are written: ``PUICLClassifier``'s
    signature, ``puicl predict``'s options and the benchmark adapter's ``puicl:`` settings all
    read them from here."""

    n_estimators: int | None = None
    single_pass_limit: int = 1024
    # 1000, not 200 (the chunk shaped like the training tasks): large chunks next to every
    # labeled row (up to max_labeled) score the development suite's large pools better, for
    # a moderate rise in time (docs/classifier_measurements.md, "Large pools and wide tables")
    chunk_size: int = 1000
    max_labeled: int = 300
    # "auto": a portfolio of learners fitted on every row beside the model, the blend chosen
    # per table on held-out labeled positives (:mod:`puicl_model.estimator.portfolio`); "none": the
    # model alone
    portfolio: PortfolioChoice = "auto"
    # pools of more unlabeled rows are fitted on a seeded sample of this many, every pool row
    # still scored (:mod:`puicl_model.estimator.pool_sample`, docs/classifier_measurements.md,
    # "The pool sample");
    # None: the whole pool, whatever its size
    pool_sample: int | None = 20_000
    # how a pool larger than single_pass_limit is scored (:mod:`puicl_model.passes.planning`):
    # "shared", per member and feature group one context of max_labeled labeled rows and
    # chunk_size pool rows, half of them from the third of the pool a logistic regression ranks
    # least positive (:mod:`puicl_model.estimator.pool_ranking`), every other pool row scored as
    # a query row of it; "chunks", random chunks of chunk_size rows, each next to its own
    # labeled rows. "shared" lifts the model alone on the development suite's large tables by
    # 0.03-0.07 AUC, for about 1.2x the default's time there (docs/recipe.md, "Training on
    # large tasks, and pools almost all positive")
    large_pool: LargePool = "shared"

    # the least value of each setting: a chunk must hold two labeled rows and two pool rows.
    # A pool sample of fewer than 100 rows makes π's report dishonest: its interval counts the
    # sample's own error by resampling the sample's rows, and on a handful of them it misses
    # the whole pool's mean of P(y=0) in 14-63 % of draws (2-5 rows; 10 % claimed) while it
    # can look narrow enough for "π is identified"; from 100 rows it holds it about as often
    # as claimed (86-91 %; simulated at π = 0.2 / 0.5 / 0.8, docs/classifier_measurements.md,
    # "The pool sample")
    MINIMUM: ClassVar[dict[str, int]] = {
        "n_estimators": 1, "single_pass_limit": 1, "chunk_size": 4, "max_labeled": 2,
        "pool_sample": 100,
    }

    # the most of a setting that has a limit. Ensemble members repeat the few of
    # ensemble.MEMBERS with fresh draws, each costing about one more single pass: beyond a few
    # dozen they add time, not accuracy, and a count such as 10**9 is a typo whose plan alone
    # would fill memory before the first forward pass
    MAXIMUM: ClassVar[dict[str, int]] = {"n_estimators": 100}

    # the words a setting of choices takes
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "portfolio": ("auto", "none"),
        "large_pool": ("chunks", "shared"),
    }

    # settings added after results were stored, with the value that reproduces those results:
    # left out of the settings that identify results (:meth:`identity`) while they hold it, so
    # that the benchmark's cached replicates keep their keys (puicl_common.versioning)
    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"portfolio": "none", "pool_sample": None,
                                               "large_pool": "chunks"}

    # settings renamed after results were stored (new name -> the name stored then): a stored
    # setting (a --method-config, a saved classifier's settings) under the old name is read
    # as the new one, and results are identified under the stored name, so that cached
    # replicates keep their keys (puicl_common.configio)
    STORED_NAMES: ClassVar[Mapping[str, str]] = {"portfolio": "partner"}

    # settings that were measured on the development suite and removed (docs/classifier.md,
    # "Column options that were removed"), each with the default it had: a stored setting
    # (a benchmark --method-config) that names one at that value loads as if it were absent,
    # any other value is refused by name (puicl_common.configio.from_mapping). At their
    # defaults they never entered the results' identity (they were LEGACY_VALUES), so cached
    # replicates keep their keys.
    REMOVED_KEYS: ClassVar[Mapping[str, Any]] = {
        "affine_copies": "keep", "few_valued_integers": "numeric", "categorical_max_levels": 10,
    }
    REMOVED_WHY: ClassVar[str] = ("the column option did not beat the default on the "
                                  "development suite (docs/classifier.md)")

    def validate(self) -> None:
        for name, minimum in self.MINIMUM.items():
            value = getattr(self, name)
            if value is None and name in ("n_estimators", "pool_sample"):
                continue
            is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            require(is_int and value >= minimum, name,
                    f"must be an integer >= {minimum}, got {value!r}")
            maximum = self.MAXIMUM.get(name)
            require(maximum is None or value <= maximum, name,
                    f"must be an integer from {minimum} to {maximum}, got {value!r}")
        for name, choices in self.CHOICES.items():
            value = getattr(self, name)
            words = ", ".join(repr(word) for word in choices[:-1]) + f" or {choices[-1]!r}"
            require(isinstance(value, str) and value in choices, name,
                    f"must be {words}, got {value!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names: each is also a parameter of ``PUICLClassifier`` and an option
        of ``puicl predict`` (``--chunk-size`` for ``chunk_size``)."""
        return tuple(field.name for field in fields(InferenceSettings))

    @classmethod
    def read_from(cls, source: object) -> InferenceSettings:
        """The settings held as attributes of ``source`` (a classifier, parsed options), so that
        a setting added here reaches every caller without a list written by hand."""
        return InferenceSettings(**{name: getattr(source, name) for name in cls.names()})

    def arguments(self) -> dict[str, Any]:
        """Every field (a subclass's too) as keyword arguments of ``PUICLClassifier``."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def identity(self) -> dict[str, Any]:
        """The settings as they identify results: those at their legacy value left out."""
        return identity_dict(self)
