"""The fitted table of a :class:`~puicl_model.estimator.classifier.PUICLClassifier`: its views
and pass planners, the model's scores of the pool, the portfolio's evidence, choice and blend,
the index that finds fitted rows, and the contexts' caches.

``fit`` builds it and calls :meth:`FittedTable.score` once: the pool is scored, the portfolio's
learners are fitted and its blend chosen, and the row index built, so that predictions only
read (scikit-learn's rule; a copy sent to other processes then scores as this one does,
:mod:`puicl_model.estimator.dask_frames`). What is asked later and costs passes of its own
(π̂ with other ``n_folds``, the class prior's report) is computed once per question and kept.

A row given to ``predict_proba`` whose encoding equals a fitted unlabeled row's gets that row's
transductive score; any other row is a new row (:mod:`puicl_model.passes.query_rows`), as the
other kind of scorer, :class:`~puicl_model.estimator.fitted_scorer.ContextsOnly`, scores every
row.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from puicl_model.estimator.ensemble import Member, fit_ensemble, hold_out, plan_passes
from puicl_model.estimator.evidence_rows import HeldRows
from puicl_model.estimator.fitted_scorer import ContextsOnly, FittedScorer, Runtime, no_table
from puicl_model.estimator.input_checks import warn_about_leaks
from puicl_model.estimator.pool_ranking import ranked
from puicl_model.estimator.pool_sample import take_rows
from puicl_model.estimator.portfolio import Portfolio, judged_held_rows, judged_pool_rows
from puicl_model.estimator.portfolio_gate import held_out_mask, runs_on
from puicl_model.estimator.prior import (
    DEFAULT_FOLDS,
    MIN_LABELED_FOR_ESTIMATES,
    class_prior_estimate,
    cross_fitted_scores,
    fold_of,
    prior_cut,
)
from puicl_model.passes.query_rows import ContextCaches
from puicl_model.passes.settings import InferenceSettings

__all__ = ["FittedTable", "Folds", "table_of"]

Folds = list[tuple[np.ndarray, np.ndarray]]  # per fold: (its positives' P(y=1), the pool's)

# Fit the portfolio's learners on a thread of their own while the model's first passes run,
# where the model runs on a GPU and the host's CPU would otherwise wait for it. Prepared and
# tested on a CPU (the same bytes either way), not yet timed on a GPU: the learners' Python and
# the passes' kernel launches take turns at the interpreter's lock, which may cost the passes
# more than the overlap saves. speed/portfolio_parts.py times both; off until it has run there.
LEARNERS_BESIDE_A_GPU = False


def learners_beside(runtime: Runtime) -> bool:
    """Whether the portfolio's learners are fitted beside the model's first passes."""
    return LEARNERS_BESIDE_A_GPU and runtime.device.type == "cuda"


@dataclass(eq=False)
class FittedTable(FittedScorer):
    """A fitted classifier's table and everything scored on it (the module's note).

    ``x_labeled``: the labeled rows the passes' context draws from, in the first view's
    encoding; ``x_pool``: the fitted unlabeled rows; ``x_held``: the labeled positives held
    out of every pass's context (None: the class prior's folds are the portfolio's evidence).
    """

    x_labeled: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    x_pool: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    x_held: np.ndarray | None = None
    pool_proba: np.ndarray = field(default_factory=lambda: np.empty(0))
    held_proba: np.ndarray | None = None
    model_folds: dict[int, Folds] = field(default_factory=dict)  # the model's, per n_folds
    pool_index: dict[bytes, int] = field(default_factory=dict, repr=False)  # not saved

    SAVED: ClassVar[Mapping[str, str]] = {
        **FittedScorer.SAVED, "x_labeled_": "x_labeled", "x_pool_": "x_pool",
        "_x_held": "x_held", "_pool_proba": "pool_proba", "_held_proba": "held_proba",
        "_held_out": "model_folds"}

    @classmethod
    def build(cls, X: Any, labeled: np.ndarray, settings: InferenceSettings, entropy: int, *,
              max_features: int, catalogue: tuple[Member, ...], n_estimators: int | None,
              encoding: dict[str, Any], n_threads: int | None) -> FittedTable:
        """The table ``X`` (``labeled``: its labeled rows) encoded in each member's view
        (``encoding``: the classifier's preprocessing settings and ``keep_columns``), the
        portfolio where its gate lets it run (:mod:`~.portfolio_gate`; its held-out positives
        moved to the end of each view's pool), the rows ranked where passes share a context,
        and the passes planned for a model of ``max_features``; nothing scored yet."""
        ensemble = fit_ensemble(X, labeled, n_estimators, catalogue, **encoding)
        base = ensemble.views[0]
        if base.preprocessor.keep_.any():  # (else one zero column stands in: no leak)
            warn_about_leaks(base.x_labeled, base.x_pool, base.preprocessor.kept_features_)
        n_labeled = len(base.x_labeled)
        held = portfolio = None
        if runs_on(settings.portfolio, n_labeled, len(base.x_pool)):
            held = held_out_mask(n_labeled, entropy)
            if held is not None:
                ensemble = hold_out(ensemble, held)
            portfolio = Portfolio.build(X, labeled, held, entropy, encoding["keep_columns"],
                                        n_threads)
        ensemble = ranked(ensemble, settings, entropy, n_threads)
        return cls(ensemble.views, plan_passes(ensemble, settings, max_features, entropy),
                   portfolio, entropy, 0 if held is None else int(held.sum()),
                   # the labeled rows the passes' context draws from (all but the held out)
                   x_labeled=ensemble.views[0].x_labeled, x_pool=base.x_pool,
                   x_held=None if held is None else base.x_labeled[held])

    @property
    def n_pool(self) -> int:
        return len(self.x_pool)

    def pool_scores(self, rows: np.ndarray) -> np.ndarray:
        return self.pool_proba[rows]

    def without_table(self, runtime: Runtime) -> ContextsOnly:
        """What a folder saved without the table holds of this one: the views without their
        rows, the portfolio as it is (the saver strips its rows), π̂ as estimated so far, and
        the prior cut for new rows where π̂ was (None: ``threshold="prior"`` then refuses)."""
        cut = (self.prior_cut(runtime)[1] if DEFAULT_FOLDS in self.class_prior else None)
        views = [dataclasses.replace(view, x_labeled=None, x_pool=None, labeled_score=None,
                                     pool_score=None) for view in self.views]
        return ContextsOnly(views, self.planners, self.portfolio, self.entropy,
                            self.n_held_out, dict(self.class_prior), self.n_passes,
                            self.inference_seconds, new_row_cut=cut)

    # ------------------------------------------------------------------- fit's scoring
    def score(self, runtime: Runtime) -> None:
        """Score the pool and choose the portfolio's blend (on positives held out of the
        passes; without them, the fallback with no evidence read), then index the rows."""
        started = time.perf_counter()
        self.n_passes = 0
        if self.portfolio is not None and self.x_held is not None:
            self._choose_on_held_out(self.portfolio, runtime)
        else:
            proba = self._first_scores(np.arange(len(self.x_pool)), runtime)
            if self.portfolio is None:
                self.pool_proba = proba
            else:
                self.portfolio.choose_fallback()
                self.pool_proba = self.portfolio.blend_pool(proba)
        self.inference_seconds = time.perf_counter() - started
        self.index_rows()

    def index_rows(self) -> None:
        """The index that finds fitted pool rows by their encoding (first copy wins): built by
        ``fit`` and again by ``load``, never saved."""
        index: dict[bytes, int] = {}
        for row, values in enumerate(self.x_pool):
            index.setdefault(values.tobytes(), row)
        self.pool_index = index

    def model_scores(self, rows: np.ndarray, runtime: Runtime,
                     held: np.ndarray | None = None) -> np.ndarray:
        """The model's P(y=1) of the fitted pool's rows ``rows``, then of the held-out
        positives ``held`` (indices among them), by passes planned over just those rows (all
        the pool's rows, and the held-out ones: the passes of the whole fitted pool)."""
        if held is not None:
            rows = np.concatenate([rows, HeldRows.positions(len(self.x_pool), held)])
        if all(planner.shares_context for planner in self.planners):
            # every row against the same contexts, drawn from the whole pool: the rows asked
            # for are scored against them (a query row's score does not depend on the others)
            views = [view.rows() for view in self.views]
            proba, passes = runtime.scorer()(self.planners, views, rows=rows,
                                             caches=self.caches(runtime))
        else:  # the rows asked for, planned as a pool of their own
            views = [view.rows(rows) for view in self.views]
            planners = [dataclasses.replace(p, n_pool=len(rows)) for p in self.planners]
            proba, passes = runtime.scorer()(planners, views)
        self.n_passes += passes
        return proba

    def _first_scores(self, rows: np.ndarray, runtime: Runtime,
                      held: np.ndarray | None = None) -> np.ndarray:
        """:meth:`model_scores`, with the portfolio's learners fitted on a thread beside it
        where :func:`learners_beside` says so (the choice then finds them fitted)."""
        if self.portfolio is None or not learners_beside(runtime):
            return self.model_scores(rows, runtime, held)
        # leaving the pool's block waits for the learners, whether or not the passes raised
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="puicl-learners") as pool:
            fitting = pool.submit(self.portfolio.fit_learners)
            proba = self.model_scores(rows, runtime, held)
        fitting.result()  # the learners' error, if they raised one
        return proba

    def _choose_on_held_out(self, portfolio: Portfolio, runtime: Runtime) -> None:
        """Score a sample of the held-out positives and of the pool rows, choose the blend on
        them, and score the rest of both with the model only where the blend weighs it."""
        n_pool, n_held = len(self.x_pool), self.n_held_out
        judged = judged_pool_rows(n_pool, self.entropy)
        judged_held = judged_held_rows(n_held, self.entropy)
        proba = self._first_scores(judged, runtime, judged_held)
        model_judged, model_held = proba[:len(judged)], proba[len(judged):]
        in_labeled = HeldRows.positions(len(portfolio.x_labeled) - n_held, judged_held)
        portfolio.choose_on([(model_held, model_judged)], [in_labeled], judged)
        model_pool = model_judged if len(judged) == n_pool else None
        if portfolio.weighs_model:
            model_pool = _completed(model_judged, judged, n_pool,
                                    lambda rest: self.model_scores(rest, runtime))
            no_pool_rows = np.empty(0, dtype=np.int64)
            model_held = _completed(model_held, judged_held, n_held,
                                    lambda rest: self.model_scores(no_pool_rows, runtime, rest))
        elif len(judged_held) < n_held:
            model_held = None  # (the blend reads only the learners' scores of them)
        self.pool_proba = portfolio.blend_pool(model_pool, judged, model_judged)
        self.held_proba = portfolio.held_proba(model_held)

    def fold_masks(self, n_folds: int) -> list[np.ndarray]:
        """Per fold of the class prior's cross-fitting: its labeled rows."""
        fold = fold_of(len(self.x_labeled), n_folds, self.entropy)
        return [fold == k for k in range(n_folds)]

    def _model_folds(self, n_folds: int, runtime: Runtime) -> Folds:
        """The model's cross-fitted scores (:func:`~puicl_model.estimator.prior.
        cross_fitted_scores`), computed once per ``n_folds``."""
        if n_folds not in self.model_folds:
            self.model_folds[n_folds] = cross_fitted_scores(runtime.scorer(), self.planners,
                                                            self.views, n_folds)
        return self.model_folds[n_folds]

    # ------------------------------------------------------------- what predictions read
    def caches(self, runtime: Runtime) -> ContextCaches | None:
        """The fitted contexts' caches (made on first use, and again when the budget
        changed), or None where none are kept."""
        if not runtime.cache_bytes:
            return None
        if self.contexts is None or self.contexts.max_bytes != runtime.cache_bytes:
            self.contexts = ContextCaches(runtime.cache_bytes)
        return self.contexts

    def probability(self, X: Any, runtime: Runtime) -> tuple[np.ndarray, np.ndarray]:
        preprocessor = self.views[0].preprocessor
        table = preprocessor.transform(X)
        # a value beyond a column's fitted range encodes as the fitted extreme: such a row is
        # a new row, scored as one (as a classifier saved without its table scores it)
        beyond = preprocessor.beyond_fitted_range(X)
        if (table.shape == self.x_pool.shape and not beyond.any()
                and np.array_equal(table, self.x_pool)):
            return self.pool_proba.copy(), np.arange(len(table))
        match = np.array([self.pool_index.get(values.tobytes(), -1) for values in table],
                         dtype=np.int64)
        match[beyond] = -1
        proba = np.empty(len(table), dtype=np.float64)
        known = match >= 0
        proba[known] = self.pool_proba[match[known]]
        if (~known).any():
            proba[~known] = self.new_probabilities(self.view_rows(X, table, ~known),
                                                   take_rows(X, np.flatnonzero(~known)),
                                                   runtime)
        return proba, match

    def held_out_scores(self, n_folds: int, runtime: Runtime) -> Folds:
        """Per fold of the labeled positives: (its P(y=1), the pool's P(y=1)), scored by the
        same passes next to the other folds (:mod:`puicl_model.estimator.prior`), through the
        chosen blend; computed once per ``n_folds``. Where labeled positives were held out of
        the passes, they are the one fold, scored with the pool (``n_folds`` is not used)."""
        if self.x_held is not None:
            assert self.held_proba is not None
            return [(self.held_proba, self.pool_proba)]
        folds = self._model_folds(n_folds, runtime)
        if self.portfolio is None:
            return folds
        return [self.portfolio.fold_proba(fold, mask)
                for fold, mask in zip(folds, self.fold_masks(n_folds), strict=True)]

    def prior_evidence(self, n_folds: int, runtime: Runtime) -> Folds | None:
        """The folds π̂ reads: none below ``MIN_LABELED_FOR_ESTIMATES`` labeled positives."""
        if len(self.x_labeled) < MIN_LABELED_FOR_ESTIMATES:
            return None
        return self.held_out_scores(n_folds, runtime)

    def estimate_class_prior(self, n_folds: int, runtime: Runtime) -> float:
        """π̂ (:func:`~puicl_model.estimator.prior.class_prior_estimate`), once per
        ``n_folds``."""
        if n_folds not in self.class_prior:
            self.class_prior[n_folds] = class_prior_estimate(
                self.pool_proba, self.prior_evidence(n_folds, runtime))
        return self.class_prior[n_folds]

    def prior_cut(self, runtime: Runtime) -> tuple[np.ndarray, float]:
        return prior_cut(self.pool_proba, self.estimate_class_prior(DEFAULT_FOLDS, runtime))


def table_of(scorer: FittedScorer, what: str) -> FittedTable:
    """``scorer`` as the fitted table ``what`` needs; a classifier without its table: the one
    error (:func:`~puicl_model.estimator.fitted_scorer.no_table`)."""
    if not isinstance(scorer, FittedTable):
        raise no_table(what)
    return scorer


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
