"""What a fitted :class:`~puicl_model.estimator.classifier.PUICLClassifier` scores rows with:
one object, built by ``fit`` (or by ``load``), that the classifier's ``predict`` family reads.

Two kinds answer the same calls:

* :class:`~puicl_model.estimator.fitted_table.FittedTable`, with the fitted table: the fitted
  pool's rows get their transductive scores, new rows theirs, and π̂ and its report read the
  labeled positives' held-out scores;
* :class:`ContextsOnly`, a classifier loaded from a folder saved without its table
  (:mod:`puicl_model.estimator.saved_model`): every row is a new row, scored against the
  fitted contexts' caches it was loaded with.

What needs the table asks for it (:func:`~puicl_model.estimator.fitted_table.table_of`), and
:func:`no_table` words the one error, :class:`NoTrainingDataError`, where there is none. The
model runs with the classifier's current settings (precision, threads, progress, cache budget:
they may be changed after ``fit``), handed to every call as a :class:`Runtime`.

Each kind declares what a saved folder holds of it (``SAVED``: an entry of state.json's
``fitted`` mapping per field, :mod:`puicl_model.estimator.saved_model`), and is rebuilt from
those entries alone (:meth:`FittedScorer.from_saved`): a field not declared is not saved.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from puicl_common.runtime import resolve_precision
from puicl_model.estimator.ensemble import View
from puicl_model.estimator.input_checks import check_settings_in_use
from puicl_model.estimator.pool_sample import NEW_ROW, take_rows
from puicl_model.estimator.portfolio import Choice, Portfolio
from puicl_model.net.backends.cached_context import ContextCache
from puicl_model.passes.inference import PassScorer
from puicl_model.passes.planning import PassPlanner
from puicl_model.passes.query_rows import ContextCaches, score_new_rows
from puicl_model.passes.scores import NonFiniteScoresError

if TYPE_CHECKING:
    from typing_extensions import Self

    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.net.model import PUICLModel

__all__ = ["SAVED_CLASSIFIER", "ContextsOnly", "FittedScorer", "NoTrainingDataError", "Runtime",
           "no_table"]

# what a saved folder holds of the classifier itself (scikit-learn's fitted attributes), as
# entries of state.json's "fitted" mapping beside the scorer's (FittedScorer.SAVED)
SAVED_CLASSIFIER = ("n_pool_in_", "n_features_in_", "feature_names_in_", "classes_",
                    "n_estimators_")
# the scorer's saved state: entry -> field. The entries keep the names folders saved before
# the fitted object existed gave them (the classifier's attributes then), so that every
# folder loads through one path
_SAVED_COMMON = {"views_": "views", "planners_": "planners", "portfolio_": "portfolio",
                 "n_held_out_": "n_held_out", "_entropy": "entropy",
                 "_class_prior": "class_prior", "n_passes_": "n_passes",
                 "inference_seconds_": "inference_seconds"}


class NoTrainingDataError(RuntimeError):
    """What needs the fitted table, asked of a classifier saved without it."""


def no_table(what: str) -> NoTrainingDataError:
    """The error of ``what``, which needs the fitted table, asked where there is none."""
    return NoTrainingDataError(f"{what} needs the training data, and this PUICLClassifier "
                               "was saved without it (save(..., training_data=False))")


@dataclass(frozen=True)
class Runtime:
    """How the model runs at this call: the fitted model on its device, and the classifier's
    current ``precision``, ``n_threads``, ``progress`` and ``context_cache_bytes``."""

    model: PUICLModel
    device: torch.device
    bfloat16: bool
    n_threads: int | None
    progress: bool | None
    cache_bytes: int

    @classmethod
    def of(cls, classifier: PUICLClassifier) -> Runtime:
        """The fitted ``classifier``'s, with its current settings: those ``set_params`` may
        change after ``fit`` (the threshold among them) are checked first, as ``fit`` checks
        them (:func:`~puicl_model.estimator.input_checks.check_settings_in_use`)."""
        check_settings_in_use(classifier)
        return cls(classifier.model_, classifier.device_,
                   bfloat16=resolve_precision(classifier.precision,
                                              classifier.device_) == "bfloat16",
                   n_threads=classifier.n_threads, progress=classifier.progress,
                   cache_bytes=classifier.context_cache_bytes)

    def scorer(self) -> PassScorer:
        """Scores rows of the fitted table by planned passes (:class:`PassScorer`)."""
        return PassScorer(self.model, self.device, bfloat16=self.bfloat16,
                          n_threads=self.n_threads, progress=self.progress)


@dataclass(eq=False)
class FittedScorer:
    """What both kinds hold: the fitted views (column encodings, and rows where the table is
    kept) and pass planners, the portfolio, the fit's root seed, and π̂ per ``n_folds``."""

    views: list[View]
    planners: list[PassPlanner]
    portfolio: Portfolio | None
    entropy: int
    n_held_out: int
    class_prior: dict[int, float] = field(default_factory=dict)
    n_passes: int = 0
    inference_seconds: float = 0.0
    # the store of the fitted contexts' caches: built where rows are scored, never saved (a
    # copy's store arrives empty, ContextCaches' note)
    contexts: ContextCaches | None = field(default=None, repr=False)

    SAVED: ClassVar[Mapping[str, str]] = _SAVED_COMMON

    def saved_state(self) -> dict[str, Any]:
        """The declared state, by entry name (the values themselves: the saver copies)."""
        return {entry: getattr(self, name) for entry, name in self.SAVED.items()}

    @classmethod
    def from_saved(cls, entries: Mapping[str, Any], **others: Any) -> Self:
        """The scorer of a saved folder's ``entries`` (checked by the loader; an entry a folder
        of an earlier puicl lacks keeps its field's default), ``others`` the fields that are
        not saved as entries."""
        unknown = set(entries) - set(cls.SAVED) - set(SAVED_CLASSIFIER)
        if unknown:
            raise ValueError(f"entries puicl does not save: {sorted(unknown)[:3]}")
        fields = {name: entries[entry] for entry, name in cls.SAVED.items() if entry in entries}
        return cls(**fields, **others)

    @property
    def n_pool(self) -> int | None:
        """The fitted pool's rows; None without the table."""
        return None

    @property
    def has_table(self) -> bool:
        return self.n_pool is not None

    @property
    def choice(self) -> Choice | None:
        return None if self.portfolio is None else self.portfolio.choice

    def caches(self, runtime: Runtime) -> ContextCaches | None:
        raise NotImplementedError

    def pool_scores(self, rows: np.ndarray) -> np.ndarray:
        """P(y=1) of the fitted pool's rows ``rows``."""
        raise no_table("scores of fitted pool rows")

    def probability(self, X: Any, runtime: Runtime) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) per row of ``X`` and each row's fitted-pool position (-1: a new row)."""
        raise NotImplementedError

    def prior_cut(self, runtime: Runtime) -> tuple[np.ndarray, float]:
        """The fitted pool rows' ``threshold="prior"`` labels, and the cut for new rows."""
        raise NotImplementedError

    def placed_probability(self, X: Any, pool_rows: Any, runtime: Runtime,
                           ) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) per row of X and its fitted-pool row: ``pool_rows`` where given (>= 0), the
        match by values (:meth:`probability`) for the rows at -1, and for those at
        :data:`~puicl_model.estimator.pool_sample.NEW_ROW` a new row's score, no match looked
        for (their row then -1)."""
        match = np.array(pool_rows, dtype=np.int64)  # a copy: the unplaced rows' are filled in
        if match.ndim != 1 or len(match) != len(X):
            raise ValueError(f"pool_rows must hold one position per row of X ({len(X)}), got "
                             f"shape {match.shape}")
        placed, n_pool = match >= 0, self.n_pool
        if placed.any() and n_pool is None:
            raise no_table("pool_rows (positions in the fitted pool)")
        if len(match) and (match.min() < NEW_ROW or match.max() >= (n_pool or 0)):
            among = "" if n_pool is None else f"the {n_pool} "
            raise ValueError(f"pool_rows must be -1, {NEW_ROW} or positions among {among}"
                             "fitted unlabeled rows")
        positive = np.empty(len(match), dtype=np.float64)
        if placed.any():
            positive[placed] = self.pool_scores(match[placed])
        for unplaced in (-1, NEW_ROW):  # (a new row's score does not depend on the call)
            rest = np.flatnonzero(match == unplaced)
            if len(rest):
                rows = take_rows(X, rest)
                positive[rest], match[rest] = (self.probability(rows, runtime) if unplaced == -1
                                               else self.new_row_probability(rows, runtime))
        return positive, match

    def new_row_probability(self, X: Any, runtime: Runtime) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) of every row of ``X`` as a new row, none looked for in the fitted pool (their
        rows: -1)."""
        table = self.views[0].preprocessor.transform(X)
        return (self.new_probabilities(self.view_rows(X, table), X, runtime),
                np.full(len(table), -1, dtype=np.int64))

    def new_probabilities(self, x_new: list[np.ndarray], X_new: Any,
                          runtime: Runtime) -> np.ndarray:
        """P(y=1) of new rows ``X_new``, ``x_new[view]`` their encoding in each view: the
        model's over the fitted contexts, through the portfolio's blend where there is one."""
        portfolio = self.portfolio
        proba = None
        if portfolio is None or portfolio.weighs_model:
            # (without the table every context is cached: the views' rows are never read)
            views = [view.rows() for view in self.views]
            proba = score_new_rows(runtime.model, views, x_new, self.planners,
                                   device=runtime.device, n_threads=runtime.n_threads,
                                   progress=runtime.progress, caches=self.caches(runtime))
        if portfolio is None:
            assert proba is not None
            return proba
        blended = portfolio.new_row_proba(X_new, proba)
        # as the model's own (puicl_model.passes.scores): a saved classifier's learners or
        # encodings of finite but extreme values overflow into NaN, which no score may carry
        bad = int(np.count_nonzero(~np.isfinite(blended)))
        if bad:
            raise NonFiniteScoresError(
                f"the portfolio's P(y=1) is NaN or infinite for {bad} of {len(blended)} new "
                "rows: its learners or their encoding hold values no fit gives (a saved "
                "classifier's state is damaged); no scores are given")
        return blended

    def view_rows(self, X: Any, table: np.ndarray, rows: np.ndarray | None = None,
                  ) -> list[np.ndarray]:
        """The rows ``rows`` (all where None) of ``X`` in every view's encoding: ``table``, the
        first view's, then the other views' encodings of the same rows."""
        views = [table] + [view.preprocessor.transform(X) for view in self.views[1:]]
        return [np.ascontiguousarray(view if rows is None else view[rows]) for view in views]


@dataclass(eq=False)
class ContextsOnly(FittedScorer):
    """A fitted classifier without its table: every fitted context's cache (keyed as the query
    path looks them up) stands in for the rows, and the prior cut found before the save (None:
    π̂ was not estimated then) stands in for the pool's scores."""

    saved_contexts: Mapping[Hashable, ContextCache] = field(default_factory=dict)
    new_row_cut: float | None = None

    SAVED: ClassVar[Mapping[str, str]] = {**_SAVED_COMMON, "_new_row_cut": "new_row_cut"}

    def caches(self, runtime: Runtime) -> ContextCaches:
        """Those it was loaded with, whatever the budget: the store ``load`` built, or (a
        copy's store arrives empty) one built whole before it is published, so that threads
        scoring at once never read a store half filled (dask's threaded workers)."""
        contexts = self.contexts
        if contexts is None or len(contexts) < len(self.saved_contexts):
            contexts = self.contexts = self.whole_store()
        return contexts

    def whole_store(self) -> ContextCaches:
        """A store holding every saved context's cache."""
        contexts = ContextCaches(sum(cache.nbytes for cache in self.saved_contexts.values()))
        for key, cache in self.saved_contexts.items():
            contexts.keep(key, cache)
        return contexts

    def probability(self, X: Any, runtime: Runtime) -> tuple[np.ndarray, np.ndarray]:
        return self.new_row_probability(X, runtime)  # no fitted pool to find rows in

    def prior_cut(self, runtime: Runtime) -> tuple[np.ndarray, float]:
        if self.new_row_cut is None:
            raise no_table('threshold="prior" (π̂ was not estimated before the save)')
        return np.zeros(0, dtype=np.int64), float(self.new_row_cut)
