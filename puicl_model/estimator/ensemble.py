"""The catalogue of ensemble members: what each shows the model, in a fixed order.

The model has no positional encoding, so shuffling rows or features changes nothing it
computes; members must differ in *what the model sees*. A member (the word is
:mod:`puicl_model.passes.planning`'s, where the passes are planned) is an encoding of the table
(:mod:`puicl_model.estimator.preprocessing`) plus optional random shares of the labeled rows and of
the features. ``n_estimators=k`` takes the first ``k`` members of :data:`MEMBERS`; beyond its
length the list repeats with fresh random draws.

Member 0 is the classifier as configured (its ``numeric`` and ``categorical`` settings, every
labeled row, every feature), so ``n_estimators=1`` is the single-pass classifier. The default,
``n_estimators=None``, depends on the table: one member for numeric-only tables, two (base and
power-ordinal) when the table has categorical columns (:func:`default_n_estimators`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from puicl_model.estimator.evidence_rows import HeldRows
from puicl_model.estimator.preprocessing import (
    CategoricalStrategy,
    MissingStrategy,
    NumericStrategy,
    TablePreprocessor,
)
from puicl_model.passes.planning import PassPlanner, ViewRows
from puicl_model.passes.settings import InferenceSettings

__all__ = [
    "DEFAULT_N_ESTIMATORS",
    "DEFAULT_N_ESTIMATORS_CATEGORICAL",
    "MEMBERS",
    "Ensemble",
    "Member",
    "View",
    "default_n_estimators",
    "fit_ensemble",
    "hold_out",
    "members_for",
    "plan_passes",
    "with_ranking",
]


@dataclass(frozen=True)
class Member:
    """What one ensemble member shows the model."""

    name: str
    numeric: NumericStrategy | None = None  # None: the classifier's own ``numeric``
    categorical: CategoricalStrategy | None = None  # None: the classifier's ``categorical``
    # each pass holds a random share of the labeled rows (at least 2); 1.0: all of them
    labeled_share: float = 1.0
    # the member sees a random share of the features, where the table has at least
    # ``planning.MIN_FEATURES_FOR_SUBSET`` of them; 1.0: all
    feature_share: float = 1.0

    def __post_init__(self) -> None:
        for name in ("labeled_share", "feature_share"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"Member {self.name!r}: {name} must be in (0, 1], got {value}")


# The members, in the order n_estimators takes them. Member 0 must stay the classifier as
# configured (n_estimators=1 is the single pass). The others are ordered by the mean AUC gain
# each gave paired with member 0 on 12 benchmark tasks with the bundled checkpoint
# (docs/performance.md, "Ensemble members"); studies/ensemble_members.py re-measures it.
MEMBERS: tuple[Member, ...] = (
    Member("base"),
    Member("power-ordinal", numeric="power", categorical="ordinal"),
    Member("standard-frequency", numeric="standard", categorical="frequency"),
    Member("feature-subset", feature_share=0.7, labeled_share=0.7),
    Member("half-labeled", labeled_share=0.5),
)

# n_estimators=None: how many members, chosen by the table (wide tables and large pools still
# get every feature group and every chunk within each member). Measured with puicl-v1 on the
# dev subset (docs/performance.md, "Ensemble members"): the second member (power-ordinal) gains
# +0.023 AUC on tables with categorical columns and +0.005 on numeric-only ones, and a second
# member costs about one more single pass. So numeric tables keep the single pass (the
# (200, 800, 20) call stays 1.0x) and tables with categorical columns get two members.
DEFAULT_N_ESTIMATORS = 1
DEFAULT_N_ESTIMATORS_CATEGORICAL = 2


def default_n_estimators(has_categorical: bool) -> int:
    """The member count ``n_estimators=None`` stands for: more members where they pay."""
    return DEFAULT_N_ESTIMATORS_CATEGORICAL if has_categorical else DEFAULT_N_ESTIMATORS


def members_for(n_estimators: int | None, catalogue: tuple[Member, ...] = MEMBERS, *,
                has_categorical: bool = False) -> list[Member]:
    """The members of an ensemble of ``n_estimators`` (None: :func:`default_n_estimators` of
    a table with or without categorical columns); entry ``m`` is
    ``catalogue[m % len(catalogue)]``."""
    count = (default_n_estimators(has_categorical) if n_estimators is None
             else int(n_estimators))
    if not catalogue or catalogue[0] != Member(catalogue[0].name):
        raise ValueError("an ensemble catalogue must start with the classifier as configured: "
                         "a Member with no other setting than its name")
    return [catalogue[index % len(catalogue)] for index in range(count)]


# ------------------------------------------------------------------------------------ views
@dataclass(frozen=True)
class View:
    """The fitted table as one encoding makes it: its labeled rows and its pool."""

    preprocessor: TablePreprocessor
    x_labeled: np.ndarray
    x_pool: np.ndarray
    # each row's ranking score, low where it looks least positive, that shared contexts are
    # drawn by (:mod:`puicl_model.estimator.pool_ranking`); None where no pass shares one
    labeled_score: np.ndarray | None = None
    pool_score: np.ndarray | None = None

    def rows(self, pool: np.ndarray | None = None) -> ViewRows:
        """Its rows as the passes read them: every pool row, or the pool rows ``pool``."""
        if pool is None:
            return ViewRows(self.x_labeled, self.x_pool, self.pool_score)
        score = None if self.pool_score is None else self.pool_score[pool]
        return ViewRows(self.x_labeled, np.ascontiguousarray(self.x_pool[pool]), score)

    def with_fold_in_pool(self, held: np.ndarray) -> View:
        """The view with the ``held`` labeled rows moved out of the labeled rows to the end
        of its pool, where the passes score them as unlabeled rows."""
        def moved(labeled: np.ndarray | None, pool: np.ndarray | None) -> tuple:
            if labeled is None or pool is None:
                return None, None
            return HeldRows(held).in_pool(labeled, pool)

        x_labeled, x_pool = moved(self.x_labeled, self.x_pool)
        labeled_score, pool_score = moved(self.labeled_score, self.pool_score)
        return View(self.preprocessor, x_labeled, x_pool, labeled_score, pool_score)


@dataclass(frozen=True)
class Ensemble:
    """The members that run on a fitted table, and the views they read."""

    views: list[View]  # views[0]: the configured encoding
    members: list[Member]
    member_views: list[int]  # the index in ``views`` of each member's view


def _fit_view(X: Any, labeled: np.ndarray, numeric: str, categorical: str, missing: str,
              quiet: bool, keep_columns: Sequence[str | int] | None = None) -> View:
    preprocessor = TablePreprocessor(categorical=categorical, missing=missing, numeric=numeric,
                                     keep_columns=keep_columns)
    with warnings.catch_warnings():
        if quiet:  # fit warns about the columns once, for the configured view
            warnings.simplefilter("ignore")
        table = preprocessor.fit_transform(X, labeled)
    return View(preprocessor, np.ascontiguousarray(table[labeled]),
                np.ascontiguousarray(table[~labeled]))


def fit_ensemble(X: Any, labeled: np.ndarray, n_estimators: int | None,
                 catalogue: tuple[Member, ...], *, numeric: NumericStrategy,
                 categorical: CategoricalStrategy, missing: MissingStrategy,
                 keep_columns: Sequence[str | int] | None = None) -> Ensemble:
    """The members of ``n_estimators`` and the views of the table ``X`` they read
    (``labeled``: the mask of the labeled rows; ``keep_columns``: columns kept although they
    look like identifiers). Only the configured view warns about the table's columns."""
    base = _fit_view(X, labeled, numeric, categorical, missing, quiet=False,
                     keep_columns=keep_columns)
    # whether the table has categorical columns sets the default member count
    members = members_for(n_estimators, catalogue,
                          has_categorical=base.preprocessor.has_categorical_)
    views = [base]
    index = {(numeric, categorical): 0}
    member_views = []
    for member in members:
        encoding = (member.numeric or numeric, member.categorical or categorical)
        if encoding not in index:
            index[encoding] = len(views)
            views.append(_fit_view(X, labeled, *encoding, missing, quiet=True,
                                   keep_columns=keep_columns))
        member_views.append(index[encoding])
    return Ensemble(views, members, member_views)


def hold_out(ensemble: Ensemble, held: np.ndarray) -> Ensemble:
    """The ensemble with the ``held`` labeled rows moved out of every view's labeled rows (the
    passes' context) to the end of its pool, where the passes score them."""
    return Ensemble([view.with_fold_in_pool(held) for view in ensemble.views],
                    ensemble.members, ensemble.member_views)


def with_ranking(ensemble: Ensemble, labeled_score: np.ndarray, pool_score: np.ndarray,
                 ) -> Ensemble:
    """The ensemble with every view holding the rows' ranking scores (one ranking of the rows,
    whatever their encoding)."""
    views = [dataclasses.replace(view, labeled_score=labeled_score, pool_score=pool_score)
             for view in ensemble.views]
    return Ensemble(views, ensemble.members, ensemble.member_views)


def plan_passes(ensemble: Ensemble, settings: InferenceSettings, max_features: int,
                entropy: int) -> list[PassPlanner]:
    """One planner per member that runs: a member whose passes would repeat an earlier
    member's exactly (the catalogue wrapped with no random draw, or a member whose encoding
    is the configured one) adds nothing but time and is left out."""
    n_labeled, n_pool = (len(rows) for rows in (ensemble.views[0].x_labeled,
                                                  ensemble.views[0].x_pool))
    planners: list[PassPlanner] = []
    seen: set[tuple[int, float, float]] = set()
    for index, (member, view) in enumerate(zip(ensemble.members, ensemble.member_views,
                                               strict=True)):
        planner = PassPlanner(
            n_labeled=n_labeled,
            n_pool=n_pool,
            n_features=ensemble.views[view].x_pool.shape[1],
            single_pass_limit=int(settings.single_pass_limit),
            chunk_size=int(settings.chunk_size),
            max_labeled=int(settings.max_labeled),
            max_features=max_features,
            entropy=entropy,
            member=index,
            view=view,
            labeled_share=member.labeled_share,
            feature_share=member.feature_share,
            shared_context=settings.large_pool == "shared",
        )
        shown = (view, member.labeled_share, member.feature_share)
        if not planner.random_choices and shown in seen:
            continue
        seen.add(shown)
        planners.append(planner)
    return planners
