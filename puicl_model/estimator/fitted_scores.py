"""How a fitted :class:`~puicl_model.estimator.classifier.PUICLClassifier` gives its rows their
probabilities: the fitted pool's (the passes, then the portfolio's blend), a new row's (the query
path over the fitted contexts' caches), and the labeled positives' held-out scores that π̂ and
the portfolio read.

A mixin of the classifier, apart so that the estimator's own module holds its scikit-learn
surface (construction, ``fit``, the ``predict`` family, reports and saving) and this one the
scoring those call. It reads the fitted attributes ``fit`` sets (``model_``, ``views_``,
``planners_``, ``x_pool_``, ``portfolio_``, ...) and computes each score once.

A classifier loaded from a folder saved without its training table
(:mod:`puicl_model.estimator.saved_model`) has no pool and no labeled rows: it scores every row
as a new row, over the fitted contexts' caches it was loaded with, and what reads the table
raises :class:`NoTrainingDataError`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from puicl_common.runtime import resolve_precision
from puicl_model.estimator.input_checks import check_table_after_fit
from puicl_model.estimator.pool_sample import NEW_ROW, take_rows
from puicl_model.estimator.portfolio import (
    Choice,
    Portfolio,
    judged_held_rows,
    judged_pool_rows,
)
from puicl_model.estimator.prior import (
    DEFAULT_FOLDS,
    MIN_LABELED_FOR_ESTIMATES,
    class_prior_estimate,
    cross_fitted_scores,
    fold_of,
    prior_cut,
)
from puicl_model.net.backends.cached_context import ContextCache
from puicl_model.passes.inference import PassScorer
from puicl_model.passes.query_rows import ContextCaches, score_new_rows

__all__ = ["FittedScores", "NoTrainingDataError"]


class NoTrainingDataError(RuntimeError):
    """What needs the fitted table, asked of a classifier saved without it."""


class FittedScores:
    """The scoring methods of a fitted classifier (a mixin of ``PUICLClassifier``)."""

    # a classifier loaded without its training table: every fitted context's cache (keyed as
    # the query path looks them up), and the prior cut for new rows (None: π̂ was not estimated
    # before the save); a fitted one has its table, and these stay None
    _saved_contexts: dict[Hashable, ContextCache] | None = None
    _new_row_cut: float | None = None

    def _needs_training_data(self, what: str) -> None:
        if self._saved_contexts is not None:
            raise NoTrainingDataError(f"{what} needs the training data, and this PUICLClassifier "
                                      "was saved without it (save(..., training_data=False))")

    def _score_fitted_table(self) -> None:
        """What predictions read, computed once in ``fit``, so that scoring leaves the
        classifier as it was (scikit-learn's rule) and a copy sent to other processes scores
        as this one does (:mod:`puicl_model.estimator.dask_frames`; computed there again, with
        other thread counts, their last bits could differ): the pool's probabilities and the
        portfolio's choice, the index that finds fitted pool rows, the store of the contexts'
        caches, and π̂ where the threshold reads it."""
        self._pool_probabilities()
        self._index_fitted_rows()
        if self.threshold == "prior":
            self.estimate_class_prior()

    def prepare(self) -> FittedScores:
        """Nothing left to do: ``fit`` now scores the fitted pool, chooses the blend and
        (``threshold="prior"``) estimates π̂. Kept so that code written for the lazy fit still
        runs; it warns, and will be removed."""
        import warnings

        warnings.warn("PUICLClassifier.prepare() is no longer needed: fit() scores the pool "
                      "and chooses the blend; prepare() will be removed", FutureWarning,
                      stacklevel=2)
        self._check_fitted()
        return self

    def _index_fitted_rows(self) -> None:
        """The index that finds fitted pool rows among the rows scored (none without the
        table: every row is new), and the store of the contexts' caches: built by ``fit``, and
        again by ``load`` (neither is saved)."""
        if self._saved_contexts is None:
            index: dict[bytes, int] = {}
            for row, values in enumerate(self.x_pool_):
                index.setdefault(values.tobytes(), row)
            self._pool_index = index
        self._new_row_caches()

    def _prepare_pool(self) -> None:
        """The pool scored and the blend chosen (before the save, where the table was left
        out of it)."""
        if self._saved_contexts is None:
            self._pool_probabilities()

    @property
    def scorer_(self) -> PassScorer:
        """Scores rows of the fitted table by planned passes, with the fitted model and the
        current ``precision``, ``n_threads`` and ``progress`` (:class:`PassScorer`): the
        pool, new rows, and the class prior's cross-fitted folds are all scored by it."""
        self._check_fitted()
        return PassScorer(self.model_, self.device_,
                          bfloat16=resolve_precision(self.precision, self.device_) == "bfloat16",
                          n_threads=self.n_threads, progress=self.progress)

    def _pool_probabilities(self) -> np.ndarray:
        """P(y=1) of every fitted unlabeled row (computed once): the model's, or the chosen
        portfolio blend's (:mod:`puicl_model.estimator.portfolio`)."""
        self._check_fitted()
        if self._pool_proba is None:
            self._needs_training_data("scoring the fitted pool")
            started = time.perf_counter()
            self.n_passes_ = 0
            if self.portfolio_ is not None and self._x_held is not None:
                self._choose_on_held_out(self.portfolio_)
            else:
                proba = self._model_scores(np.arange(len(self.x_pool_)))
                if self.portfolio_ is None:
                    self._pool_proba = proba
                else:  # the class prior's cross-fitted folds are the evidence
                    judged, folds = self._evidence_folds()
                    self._pool_proba = self.portfolio_.choose_on_folds(
                        proba, folds, self._fold_masks(DEFAULT_FOLDS), judged)
            self.inference_seconds_ = time.perf_counter() - started
        return self._pool_proba

    def _model_scores(self, rows: np.ndarray, held: np.ndarray | None = None) -> np.ndarray:
        """The model's P(y=1) of the fitted pool's rows ``rows``, then of the held-out
        positives ``held`` (indices among them), by passes planned over just those rows (all
        the pool's rows, and the held-out ones: the passes of the whole fitted pool)."""
        if held is not None:
            rows = np.concatenate([rows, len(self.x_pool_) + held])
        if all(planner.shares_context for planner in self.planners_):
            # every row against the same contexts, drawn from the whole pool: the rows asked
            # for are scored against them (a query row's score does not depend on the others)
            views = [view.rows() for view in self.views_]
            proba, passes = self.scorer_(self.planners_, views, rows=rows,
                                         caches=self._new_row_caches())
        else:  # the rows asked for, planned as a pool of their own
            views = [view.rows(rows) for view in self.views_]
            planners = [dataclasses.replace(p, n_pool=len(rows)) for p in self.planners_]
            proba, passes = self.scorer_(planners, views)
        self.n_passes_ += passes
        return proba

    def _choose_on_held_out(self, portfolio: Portfolio) -> None:
        """Score a sample of the held-out positives and of the pool rows, choose the blend on
        them, and score the rest of both with the model only where the blend weighs it."""
        n_pool, n_held = len(self.x_pool_), self.n_held_out_
        judged = judged_pool_rows(n_pool, self._entropy)
        judged_held = judged_held_rows(n_held, self._entropy)
        proba = self._model_scores(judged, judged_held)
        model_judged, model_held = proba[:len(judged)], proba[len(judged):]
        portfolio.choose_on_held_out(model_judged, model_held, judged, judged_held)
        model_pool = model_judged if len(judged) == n_pool else None
        if portfolio.weighs_model:
            model_pool = _completed(model_judged, judged, n_pool,
                                    lambda rest: self._model_scores(rest))
            no_pool_rows = np.empty(0, dtype=np.int64)
            model_held = _completed(model_held, judged_held, n_held,
                                    lambda rest: self._model_scores(no_pool_rows, rest))
        elif len(judged_held) < n_held:
            model_held = None  # (the blend reads only the learners' scores of them)
        self._pool_proba, self._held_proba = portfolio.held_out_proba(
            model_pool, model_held, model_judged, judged)

    @property
    def choice_(self) -> Choice | None:
        """What the portfolio chose on this table (members, weights, each candidate's held-out
        AUC, why), or None where the model alone runs (``partner="none"``, or a table below
        the portfolio's sizes); scores the pool if it was not scored yet."""
        if self.portfolio_ is None:
            return None
        self._prepare_pool()
        return self.portfolio_.choice

    @property
    def blend_weight_(self) -> float:
        """The model's weight in the chosen blend (1.0: the model alone)."""
        choice = self.choice_
        return 1.0 if choice is None else float(choice.weights.get("model", 0.0))

    def _new_probabilities(self, x_new: list[np.ndarray], X_new: Any) -> np.ndarray:
        """P(y=1) of new rows ``X_new``, ``x_new[view]`` their encoding in each view."""
        self._prepare_pool()  # the blend, where there is one, is chosen on the pool
        portfolio = self.portfolio_
        proba = None
        if portfolio is None or portfolio.weighs_model:
            # (without the table every context is cached: the views' rows are never read)
            views = [view.rows() for view in self.views_]
            proba = score_new_rows(self.model_, views, x_new, self.planners_,
                                   device=self.device_, n_threads=self.n_threads,
                                   progress=self.progress, caches=self._new_row_caches())
        if portfolio is None:
            assert proba is not None
            return proba
        return portfolio.new_row_proba(X_new, proba)

    def _new_row_caches(self) -> ContextCaches | None:
        """The fitted contexts' caches (made on first use, and again when
        ``context_cache_bytes`` changed), or None where none are kept; without the table,
        those it was loaded with, whatever the budget."""
        saved = self._saved_contexts
        if saved is not None:
            caches = getattr(self, "_context_caches", None)
            if caches is None or len(caches) < len(saved):  # (a copy's store arrives empty)
                total = sum(cache.nbytes for cache in saved.values())
                self._context_caches = ContextCaches(total)
                for key, cache in saved.items():
                    self._context_caches.keep(key, cache)
            return self._context_caches
        budget = self.context_cache_bytes
        if not budget:
            return None
        caches = getattr(self, "_context_caches", None)
        if caches is None or caches.max_bytes != budget:
            caches = self._context_caches = ContextCaches(budget)
        return caches

    def _positive_probability(self, X: Any, new: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) per row of X, and the fitted-pool index of each row (-1 for new rows);
        ``new``: the caller knows every row is new, and none is looked for in the pool."""
        self._check_fitted()
        check_table_after_fit(self, X)
        table = self.preprocessor_.transform(X)
        if new or self._saved_contexts is not None:  # no fitted pool to find rows in
            return (self._new_probabilities(self._view_rows(X, table), X),
                    np.full(len(table), -1, dtype=np.int64))
        pool_proba = self._pool_probabilities()
        # a value beyond a column's fitted range encodes as the fitted extreme: such a row is
        # a new row, scored as one (as a classifier saved without its table scores it)
        beyond = self.preprocessor_.beyond_fitted_range(X)
        if (table.shape == self.x_pool_.shape and not beyond.any()
                and np.array_equal(table, self.x_pool_)):
            return pool_proba.copy(), np.arange(len(table))
        assert self._pool_index is not None  # (built by fit)
        match = np.array([self._pool_index.get(values.tobytes(), -1) for values in table],
                         dtype=np.int64)
        match[beyond] = -1
        proba = np.empty(len(table), dtype=np.float64)
        known = match >= 0
        proba[known] = pool_proba[match[known]]
        if (~known).any():
            proba[~known] = self._new_probabilities(self._view_rows(X, table, ~known),
                                                    take_rows(X, np.flatnonzero(~known)))
        return proba, match

    def _view_rows(self, X: Any, table: np.ndarray, rows: np.ndarray | None = None,
                   ) -> list[np.ndarray]:
        """The rows ``rows`` (all where None) of ``X`` in every view's encoding: ``table``, the
        configured view's, then the other views' encodings of the same rows."""
        views = [table] + [view.preprocessor.transform(X) for view in self.views_[1:]]
        return [np.ascontiguousarray(view if rows is None else view[rows]) for view in views]

    def estimate_class_prior(self, n_folds: int = DEFAULT_FOLDS) -> float:
        """π̂: the estimated negative share of the fitted unlabeled pool.

        The labeled positives are cross-fitted (:mod:`puicl_model.estimator.prior`): split in
        ``n_folds`` folds, each fold is scored as unlabeled rows next to the other folds, by
        the same passes that score the pool. The rule on those scores and the pool's is
        :func:`puicl_model.estimator.prior.class_prior_estimate` (docs/benchmark.md measures it
        against other estimators). With fewer than
        ``MIN_LABELED_FOR_ESTIMATES`` labeled positives, the mean of P(y=0) over the pool.
        Costs ``n_folds`` extra scorings of the pool, computed once per ``n_folds``.
        """
        self._check_folds(n_folds)
        if n_folds not in self._class_prior:
            self._needs_training_data(f"estimate_class_prior(n_folds={n_folds})")
            folds = (self._held_out_scores(n_folds)
                     if len(self.x_labeled_) >= MIN_LABELED_FOR_ESTIMATES else None)
            self._class_prior[n_folds] = class_prior_estimate(self._pool_probabilities(), folds)
        return self._class_prior[n_folds]

    def _check_folds(self, n_folds: int) -> None:
        self._check_fitted()
        if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
            raise ValueError(f"n_folds must be an integer >= 2, got {n_folds!r}")

    def fitted_pool_proba(self) -> np.ndarray:
        """P(y=1) of every unlabeled row the classifier was fitted on, in their order in ``fit``'s
        table (where the pool was sampled, ``pool_sample``, the sample's rows): the scores that
        ``estimate_class_prior`` and the prior cut read, the model's or the chosen portfolio
        blend's. Computed once, in ``fit``; a copy, for studies and reports
        that read the scores themselves."""
        self._needs_training_data("fitted_pool_proba()")
        return self._pool_probabilities().copy()

    def held_out_scores(self, n_folds: int = DEFAULT_FOLDS,
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per fold of the labeled positives: (the fold's P(y=1), the fitted pool's P(y=1)),
        the fold scored as unlabeled rows next to the other folds, by the passes that score the
        pool (:mod:`puicl_model.estimator.prior`): the evidence π̂ and the portfolio's choice
        read. Where labeled positives were held out of every pass (``n_held_out_`` > 0), they
        are the one fold and ``n_folds`` is not used. Computed once per ``n_folds`` (each
        costs ``n_folds`` scorings of the pool); copies."""
        self._check_folds(n_folds)
        self._needs_training_data("held_out_scores()")
        return [(held.copy(), pool.copy()) for held, pool in self._held_out_scores(n_folds)]

    def _held_out_scores(self, n_folds: int = DEFAULT_FOLDS,
                         ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per fold of the labeled positives: (its P(y=1), the pool's P(y=1)), scored by the
        same passes next to the other folds (:mod:`puicl_model.estimator.prior`); computed once
        per ``n_folds``, so that ``class_prior_report`` reuses ``estimate_class_prior``'s.
        Where labeled positives were held out of the passes, they are the one fold: already
        scored with the pool, at no extra cost (``n_folds`` is then not used)."""
        if self._x_held is not None:
            pool = self._pool_probabilities()
            assert self._held_proba is not None
            return [(self._held_proba, pool)]
        folds = self._model_folds(n_folds)
        if self.portfolio_ is None:
            return folds
        self._pool_probabilities()  # the blend is chosen on the default folds
        return [self.portfolio_.fold_proba(fold, mask)
                for fold, mask in zip(folds, self._fold_masks(n_folds), strict=True)]

    def _model_folds(self, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The model's cross-fitted scores
        (:func:`puicl_model.estimator.prior.cross_fitted_scores`),
        computed once per ``n_folds``."""
        if n_folds not in self._held_out:
            self._needs_training_data("scoring the labeled positives' folds")
            self._held_out[n_folds] = cross_fitted_scores(self.scorer_, self.planners_,
                                                           self.views_, n_folds)
        return self._held_out[n_folds]

    def _evidence_folds(self) -> tuple[np.ndarray | None,
                                       list[tuple[np.ndarray, np.ndarray]]]:
        """The pool rows the portfolio judges on (None: all), and the model's cross-fitted
        scores of the default folds against them: the class prior's own folds where those
        rows are the whole pool (no extra pass); on a larger pool scored through shared
        contexts, the folds scored against the judged sample alone (the blend's evidence
        needs no more: each fold would otherwise be a pass over every pool row), the same
        sample large tables judge on. π̂ still reads folds against every pool row, scored when
        it is asked for."""
        n_pool = len(self.x_pool_)
        judged = judged_pool_rows(n_pool, self._entropy)
        if len(judged) == n_pool or not all(p.shares_context for p in self.planners_):
            return None, self._model_folds(DEFAULT_FOLDS)
        self._needs_training_data("scoring the labeled positives' folds")
        folds = cross_fitted_scores(self.scorer_, self.planners_, self.views_, DEFAULT_FOLDS,
                                    pool_rows=judged)
        return judged, folds

    def _fold_masks(self, n_folds: int) -> list[np.ndarray]:
        fold = fold_of(len(self.x_labeled_), n_folds, self._entropy)
        return [fold == k for k in range(n_folds)]

    def _prior_cut(self) -> tuple[np.ndarray, float]:
        """Labels of the pool rows with the π̂ share negative, and the cut for new rows."""
        if self._saved_contexts is not None:  # no pool rows; the cut found before the save
            if self._new_row_cut is None:
                self._needs_training_data('threshold="prior" (π̂ was not estimated before the '
                                          "save)")
            return np.zeros(0, dtype=np.int64), float(self._new_row_cut)
        return prior_cut(self._pool_probabilities(), self.estimate_class_prior())

    def _placed_probability(self, X: Any, pool_rows: Any) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) per row of X and its fitted-pool row: ``pool_rows`` where given (>= 0), the
        match by values (:meth:`_positive_probability`) for the rows at -1, and for those at
        ``NEW_ROW`` a new row's score, without a match looked for (their row then -1)."""
        self._check_fitted()
        match = np.array(pool_rows, dtype=np.int64)  # a copy: the unplaced rows' are filled in
        if match.ndim != 1 or len(match) != len(X):
            raise ValueError(f"pool_rows must hold one position per row of X ({len(X)}), got "
                             f"shape {match.shape}")
        if (match >= 0).any():
            self._needs_training_data("pool_rows (positions in the fitted pool)")
        if len(match) and (match.min() < NEW_ROW or match.max() >= len(self.x_pool_)):
            raise ValueError(f"pool_rows must be -1, {NEW_ROW} or positions among the "
                             f"{len(self.x_pool_)} fitted unlabeled rows")
        placed = match >= 0
        positive = np.empty(len(match), dtype=np.float64)
        if placed.any():
            positive[placed] = self._pool_probabilities()[match[placed]]
        for unplaced in (-1, NEW_ROW):  # (a new row's score does not depend on the call)
            rest = np.flatnonzero(match == unplaced)
            if len(rest):
                positive[rest], match[rest] = self._positive_probability(
                    take_rows(X, rest), new=unplaced == NEW_ROW)
        return positive, match


def _completed(scored: np.ndarray, rows: np.ndarray, n: int,
               score_rest: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``n`` probabilities: ``scored`` at ``rows`` (sorted), the others by ``score_rest``."""
    if len(rows) == n:
        return scored
    rest = np.setdiff1d(np.arange(n), rows, assume_unique=True)
    out = np.empty(n)
    out[rows] = scored
    out[rest] = score_rest(rest)
    return out
