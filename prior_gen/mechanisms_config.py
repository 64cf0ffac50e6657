"""Configuration of the prior's optional mechanisms beyond the paper's MLP SCM.

Seven sections, each absent (``None``) by default, which is also its legacy value: a config
without them keeps its hash, its shards and its checkpoints (the versioning rule,
``prior_gen.config.LEGACY_VALUES``, docs/architecture.md §6).

* ``prior.scm.families`` (:class:`FamiliesConfig`): hidden nodes computed by other function
  families than the paper's MLP layer (trees, thresholds, products, linear maps), mixed per
  node or per task (``prior_gen.families``). TabICL's prior has tree-based SCMs next to
  MLP-based ones (arXiv 2502.05564); Mitra trains on a mixture of priors chosen for their
  diversity and distinctiveness, tree-based ones among them (arXiv 2510.21204).
* ``prior.label_rule`` (:class:`LabelRuleConfig`): with a probability per task, the positive
  class is a boolean rule over a few discretised features (MONK-like) instead of the rank of
  the SCM's score (``prior_gen.rule_label``).
* ``prior.dataset.columns`` (:class:`ColumnsConfig`): per-task post-processing of the feature
  columns as real tables have them: duplicates, copies, sums, integers, counts, skewed and
  heavy-tailed marginals, few distinct values, irrelevant noise (``prior_gen.columns``).
* ``prior.dataset.wide`` (:class:`WideConfig`): with a probability per task, a feature count
  from a wider range than ``prior.dataset.n_features`` (``prior_gen.wide``).
* ``prior.labeling`` (:class:`LabelingConfig`): with a probability per task, the labeled
  positives are drawn with a propensity that depends on the features (selection bias, SAR)
  instead of uniformly (``prior_gen.labeling``).
* ``prior.label_noise`` (:class:`LabelNoiseConfig`): with a probability per task, the label is
  the rank of the SCM's score plus row-wise noise, so that the features no longer decide it
  (``prior_gen.label_noise``).
* ``prior.real_tables`` (:class:`RealTablesConfig`): with a probability per task, the task is
  cut from a corpus of real tables instead of the SCM's output (``prior_gen.real_tables``).

This module imports nothing from ``prior_gen.config`` (which imports it), and the family
registry only inside :meth:`FamiliesConfig.validate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from puicl_common.configio import require

__all__ = [
    "COLUMN_MECHANISMS",
    "ColumnsConfig",
    "FamiliesConfig",
    "LabelNoiseConfig",
    "LabelRuleConfig",
    "LabelingConfig",
    "RealTablesConfig",
    "WideConfig",
]


def _range(value: tuple[int, int], key: str, minimum: int) -> None:
    lo, hi = value
    require(lo >= minimum, key, f"lower bound must be >= {minimum}, got {lo}")
    require(lo <= hi, key, f"lower bound {lo} is above upper bound {hi}")


def _probability(value: float, key: str) -> None:
    require(0.0 <= value <= 1.0, key, f"must lie in [0, 1], got {value}")


def _finite_nonnegative_range(value: tuple[float, float], key: str) -> None:
    lo, hi = value
    require(math.isfinite(hi), key, f"must be finite, got {hi}")
    require(lo >= 0, key, f"lower bound must be >= 0, got {lo}")
    require(lo <= hi, key, f"lower bound {lo} is above upper bound {hi}")


@dataclass(frozen=True)
class FamiliesConfig:
    """``prior.scm.families``: which function computes each hidden node of the SCM.

    ``weights`` maps family names (``prior_gen.families.FAMILIES``: mlp, tree, threshold,
    product, linear) to relative weights; a node (``scope: node``) or a whole task
    (``scope: task``) draws its family with these probabilities. Families missing from the
    mapping have weight 0. Needs ``prior.scm.arithmetic: portable``: the new nodes are written
    in the portable arithmetic only.
    """

    weights: dict[str, float] = field(default_factory=lambda: {"mlp": 1.0})
    scope: Literal["node", "task"] = "node"
    parents: tuple[int, int] = (1, 3)  # tree and linear nodes: U{lo..hi} distinct parents
    tree_depth: tuple[int, int] = (1, 3)  # a tree node: a complete tree of U{lo..hi} levels
    thresholds: tuple[int, int] = (1, 4)  # a threshold node: U{lo..hi} cut points

    def validate(self) -> None:
        from prior_gen.families import FAMILIES  # the registry imports numpy: only when used

        require(len(self.weights) > 0, "weights", "needs at least one family")
        for name, weight in self.weights.items():
            require(
                name in FAMILIES,
                f"weights.{name}",
                f"unknown family {name!r} (known: {', '.join(sorted(FAMILIES))})",
            )
            require(
                math.isfinite(weight) and weight >= 0,
                f"weights.{name}",
                f"must be a finite number >= 0, got {weight}",
            )
        require(sum(self.weights.values()) > 0, "weights", "needs a positive weight")
        _range(self.parents, "parents", 1)
        _range(self.tree_depth, "tree_depth", 1)
        require(self.tree_depth[1] <= 8, "tree_depth", "at most 8 levels (256 leaves)")
        _range(self.thresholds, "thresholds", 1)


@dataclass(frozen=True)
class LabelRuleConfig:
    """``prior.label_rule``: P(a task's positive class is a boolean rule) and its shape.

    The rule's core is a random and/or combination of literals over ``features`` discretised
    feature columns of ``levels`` levels each; one threshold on a further column closes it so
    that the rule holds on as many rows as the task's π asks for (``prior_gen.rule_label``).
    """

    probability: float = 0.5
    features: tuple[int, int] = (1, 3)
    levels: tuple[int, int] = (2, 4)

    def validate(self) -> None:
        _probability(self.probability, "probability")
        _range(self.features, "features", 1)
        _range(self.levels, "levels", 2)


@dataclass(frozen=True)
class LabelingConfig:
    """``prior.labeling``: P(a task's labeled positives are a biased draw) and the slope range
    of its propensity 1 / (1 + ≈exp(−k·z)), z a standardized random projection of the features
    (``prior_gen.labeling``)."""

    probability: float = 0.5
    strength: tuple[float, float] = (1.0, 3.0)

    def validate(self) -> None:
        _probability(self.probability, "probability")
        _finite_nonnegative_range(self.strength, "strength")


@dataclass(frozen=True)
class LabelNoiseConfig:
    """``prior.label_noise``: P(a task's label is the rank of a noisy score) and the range of
    the noise's standard deviation τ, in units of the standardized score's
    (``prior_gen.label_noise``)."""

    probability: float = 0.5
    scale: tuple[float, float] = (0.0, 1.5)

    def validate(self) -> None:
        _probability(self.probability, "probability")
        _finite_nonnegative_range(self.scale, "scale")


# The column mechanisms in the order a task applies them (and draws their choices): in-place
# marginal changes first, then noise columns, then copies, so that a copy copies the changed
# column and an exact duplicate stays exact. Append new mechanisms, never reorder.
COLUMN_MECHANISMS = (
    "skewed",
    "heavy_tailed",
    "integer",
    "count",
    "low_cardinality",
    "noise",
    "duplicate",
    "near_duplicate",
    "scaled_copy",
    "sum",
)


@dataclass(frozen=True)
class ColumnsConfig:
    """``prior.dataset.columns``: per task, each mechanism is used with its probability and
    then changes U{1..max_columns} columns (never more than the task has); see
    ``prior_gen.columns`` for what each does."""

    skewed: float = 0.1
    heavy_tailed: float = 0.1
    integer: float = 0.1
    count: float = 0.1
    low_cardinality: float = 0.1
    noise: float = 0.1
    duplicate: float = 0.1
    near_duplicate: float = 0.1
    scaled_copy: float = 0.1
    sum: float = 0.1
    max_columns: int = 2

    def validate(self) -> None:
        for name in COLUMN_MECHANISMS:
            _probability(getattr(self, name), name)
        require(self.max_columns >= 1, "max_columns", f"must be >= 1, got {self.max_columns}")

    def probabilities(self) -> tuple[float, ...]:
        return tuple(getattr(self, name) for name in COLUMN_MECHANISMS)


@dataclass(frozen=True)
class WideConfig:
    """``prior.dataset.wide``: with probability ``probability`` a task draws its feature count
    from U{``n_features``} instead of ``prior.dataset.n_features`` (``prior_gen.wide``)."""

    probability: float = 0.2
    n_features: tuple[int, int] = (20, 100)

    def validate(self) -> None:
        _probability(self.probability, "probability")
        _range(self.n_features, "n_features", 1)


@dataclass(frozen=True)
class RealTablesConfig:
    """``prior.real_tables``: with probability ``probability`` a task is cut from an entry of
    the corpus at ``corpus`` (``scripts/build_real_corpus.py``), whose SHA-256 must be
    ``sha256``; the digest, not the path, is what the config's hash covers the corpus by."""

    corpus: str = "data/real_corpus.npz"
    sha256: str = ""
    probability: float = 0.5
    # True: a task to be replaced is cut from the corpus before its SCM would run, and the SCM
    # does not run (faster generation); its metadata then holds the plan's factors alone.
    # False: the replaced task's SCM runs, as in shards made before this key existed.
    skip_scm: bool = False

    def validate(self) -> None:
        _probability(self.probability, "probability")
        require(isinstance(self.skip_scm, bool), "skip_scm", "must be true or false")
        require(bool(self.corpus), "corpus", "must name the corpus file")
        require(len(self.sha256) == 64 and all(c in "0123456789abcdef" for c in self.sha256),
                "sha256", "must be the corpus file's SHA-256 (64 lower-case hex digits), as "
                "scripts/build_real_corpus.py prints it")
