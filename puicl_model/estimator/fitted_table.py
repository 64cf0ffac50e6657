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
import functools
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from puicl_model.estimator.ensemble import Member, fit_ensemble, plan_passes
from puicl_model.estimator.evidence_rows import (
    JUDGED_POOL_ROWS,
    MOST_JUDGED_POOL_ROWS,
    HeldRows,
)
from puicl_model.estimator.fitted_scorer import ContextsOnly, FittedScorer, Runtime, no_table
from puicl_model.estimator.held_out_evidence import HeldOutEvidence
from puicl_model.estimator.input_checks import warn_about_leaks
from puicl_model.estimator.pool_ranking import ranked
from puicl_model.estimator.pool_sample import take_rows
from puicl_model.estimator.portfolio import (
    Portfolio,
    judged_held_rows,
    judged_pool_rows,
    undecided,
)
from puicl_model.estimator.portfolio_gate import held_out_mask, reads_folds, runs_on
from puicl_model.estimator.prior import (
    DEFAULT_FOLDS,
    MIN_LABELED_FOR_ESTIMATES,
    class_prior_estimate,
    cross_fitted_scores,
    fold_of,
    prior_cut,
    prior_pool_rows,
)
from puicl_model.passes.query_rows import ContextCaches
from puicl_model.passes.settings import InferenceSettings

__all__ = ["FittedTable", "Folds", "HeldOutEvidence", "table_of"]

Folds = list[tuple[np.ndarray, np.ndarray]]  # per fold: (its positives' P(y=1), the pool's)
Result = TypeVar("Result")

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
    encoding; ``x_pool``: the fitted unlabeled rows; ``x_held``: the labeled positives that are
    the portfolio's evidence (None: the class prior's folds are its evidence where a study asks).
    ``held_in_context``: those positives are among ``x_labeled`` and in the passes' context, set
    apart only from the evidence's passes (``evidence_pool_proba``: the judged pool rows' P(y=1)
    there). Folders saved before keep them out of every pass's context, after the pool in each
    view (``held_in_context`` False: no ``evidence_pool_proba``), and load as they were.
    """

    x_labeled: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    x_pool: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    x_held: np.ndarray | None = None
    pool_proba: np.ndarray = field(default_factory=lambda: np.empty(0))
    held_proba: np.ndarray | None = None
    model_folds: dict[int, Folds] = field(default_factory=dict)  # the model's, per n_folds
    held_in_context: bool = False
    evidence_pool_proba: np.ndarray | None = None
    pool_index: dict[bytes, int] = field(default_factory=dict, repr=False)  # not saved
    # what predict's cut was found to label, per threshold (threshold_note): not saved
    threshold_notes: dict[float, str | None] = field(default_factory=dict, repr=False)
    # per class prior's fold, the rows the portfolio's choice scored (HeldOutEvidence.known)
    # until π̂ reads the folds: not saved (a loaded table scores its folds whole)
    fold_scores: list[np.ndarray] | None = field(default=None, repr=False)

    SAVED: ClassVar[Mapping[str, str]] = {
        **FittedScorer.SAVED, "x_labeled_": "x_labeled", "x_pool_": "x_pool",
        "_x_held": "x_held", "_pool_proba": "pool_proba", "_held_proba": "held_proba",
        "_held_out": "model_folds", "_held_in_context": "held_in_context",
        "_evidence_pool_proba": "evidence_pool_proba"}

    @classmethod
    def build(cls, X: Any, labeled: np.ndarray, settings: InferenceSettings, entropy: int, *,
              max_features: int, catalogue: tuple[Member, ...], n_estimators: int | None,
              encoding: dict[str, Any], n_threads: int | None) -> FittedTable:
        """The table ``X`` (``labeled``: its labeled rows) encoded in each member's view
        (``encoding``: the classifier's preprocessing settings and ``keep_columns``), the
        portfolio where its gate lets it run (:mod:`~.portfolio_gate`, with the labeled
        positives that are its evidence), the rows ranked where passes share a context, and
        the passes planned for a model of ``max_features``, as the model alone plans them;
        nothing scored yet."""
        ensemble = fit_ensemble(X, labeled, n_estimators, catalogue, **encoding)
        base = ensemble.views[0]
        if base.preprocessor.keep_.any():  # (else one zero column stands in: no leak)
            warn_about_leaks(base.x_labeled, base.x_pool, base.preprocessor.kept_features_)
        n_labeled = len(base.x_labeled)
        held = portfolio = None
        ensemble = ranked(ensemble, settings, entropy, n_threads)
        planners = plan_passes(ensemble, settings, max_features, entropy)
        if runs_on(settings.portfolio, n_labeled, len(base.x_pool)):
            held = held_out_mask(n_labeled, entropy)
            folds = held is None and reads_folds(
                n_labeled, len(base.x_pool), all(p.shares_context for p in planners))
            portfolio = Portfolio.build(X, labeled, held, entropy, encoding["keep_columns"],
                                        n_threads, folds=folds,
                                        feature_groups=planners[0].n_feature_groups)
        return cls(ensemble.views, planners,
                   portfolio, entropy, 0 if held is None else int(held.sum()),
                   x_labeled=base.x_labeled, x_pool=base.x_pool,
                   x_held=None if held is None else base.x_labeled[held],
                   held_in_context=held is not None)

    @property
    def n_labeled(self) -> int:
        """The labeled positives of the fit, those held out of the passes' context included."""
        return len(self.x_labeled) + (0 if self.held_in_context else self.n_held_out)

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
        passes; without them, on the class prior's folds where the portfolio reads them, else
        the fallback with no evidence read), then index the rows."""
        started = time.perf_counter()
        self.n_passes = 0
        if self.portfolio is not None and self.x_held is not None:
            self._choose_on_held_out(self.portfolio, runtime)
        else:
            proba = self._first_scores(np.arange(len(self.x_pool)), runtime)
            if self.portfolio is None:
                self.pool_proba = proba
            else:
                if self.portfolio.members_read_folds:
                    self._choose_on_folds(self.portfolio, runtime)
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

    def _first_scores(self, rows: np.ndarray, runtime: Runtime) -> np.ndarray:
        """:meth:`model_scores`, with the portfolio's learners fitted on a thread beside it
        where :func:`learners_beside` says so (the choice then finds them fitted)."""
        return self._beside_learners(lambda: self.model_scores(rows, runtime), runtime)

    def _beside_learners(self, work: Callable[[], Result], runtime: Runtime) -> Result:
        """``work()`` (the model's passes), with the portfolio's learners fitted on a thread
        beside it where :func:`learners_beside` says so."""
        if self.portfolio is None or not learners_beside(runtime):
            return work()
        # leaving the pool's block waits for the learners, whether or not the passes raised
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="puicl-learners") as pool:
            fitting = pool.submit(self.portfolio.fit_learners)
            result = work()
        fitting.result()  # the learners' error, if they raised one
        return result

    def _choose_on_held_out(self, portfolio: Portfolio, runtime: Runtime) -> None:
        """Choose the blend on the held-out positives against a sample of the pool, both
        scored by passes that set the positives apart from their context (the evidence),
        reading more of both while the choice is close (:func:`~.portfolio.undecided`); then
        score the pool as the model alone scores it only where the blend weighs the model."""
        n_pool, n_held = len(self.x_pool), self.n_held_out
        evidence = HeldOutEvidence.of(self, runtime)
        in_labeled = len(portfolio.x_labeled) - n_held  # where the learners lay them
        judged = judged_pool_rows(n_pool, self.entropy)  # (the first samples' sizes)
        judged_held = judged_held_rows(n_held, self.entropy)
        # (the learners fitted beside the first passes, where that pays)
        self._beside_learners(functools.partial(evidence.scores, judged, judged_held), runtime)
        while True:
            model_judged, model_held = evidence.scores(judged, judged_held)
            choice = portfolio.choose_on([(model_held, model_judged)],
                                         [HeldRows.positions(in_labeled, judged_held)], judged)
            read_all = len(judged) == n_pool and len(judged_held) == n_held
            if (read_all or len(judged) >= MOST_JUDGED_POOL_ROWS
                    or not undecided(choice, portfolio.fallback, portfolio.z)):
                break
            judged = judged_pool_rows(n_pool, self.entropy,
                                      min(2 * len(judged), MOST_JUDGED_POOL_ROWS))
            judged_held = judged_held_rows(n_held, self.entropy, 2 * len(judged_held))
        portfolio.settle()
        model_all_held = evidence.scores(judged, np.arange(n_held))[1]
        self.n_passes += evidence.n_passes
        if portfolio.weighs_model:
            self.pool_proba = portfolio.blend_pool(self.model_scores(np.arange(n_pool), runtime))
        else:
            self.pool_proba = portfolio.blend_pool(None, judged, model_judged)
        self.held_proba, self.evidence_pool_proba = portfolio.evidence_proba(
            model_all_held, model_judged, judged)

    def _choose_on_folds(self, portfolio: Portfolio, runtime: Runtime) -> None:
        """Choose the blend on the class prior's DEFAULT_FOLDS folds: every labeled positive,
        scored by passes without its fold, against a seeded sample of the pool rows the folds
        score for π̂ (500 first, doubled while the choice is close, :func:`~.portfolio.
        undecided`). What was scored is kept (``fold_scores``), so that π̂ scores only the
        rest of its rows (:meth:`_model_folds`)."""
        masks = self.fold_masks(DEFAULT_FOLDS)
        evidence = self._fold_evidence(masks, runtime)
        prior_rows = self._prior_rows()
        size = JUDGED_POOL_ROWS
        while True:
            judged = prior_rows[judged_pool_rows(len(prior_rows), self.entropy, size)]
            folds = [fold.scores(judged, np.arange(fold.n_held))[::-1] for fold in evidence]
            choice = portfolio.choose_on(folds, masks, judged)
            if (len(judged) == len(prior_rows)
                    or not undecided(choice, portfolio.fallback, portfolio.z)):
                break
            size *= 2
        portfolio.settle()
        self.n_passes += sum(fold.n_passes for fold in evidence)
        self.fold_scores = [fold.known for fold in evidence]

    def _fold_evidence(self, masks: list[np.ndarray], runtime: Runtime,
                       ) -> list[HeldOutEvidence]:
        """The passes of each of the class prior's DEFAULT_FOLDS folds (``masks``: their
        labeled rows), with the rows scored so far (``fold_scores``) known."""
        known = self.fold_scores or [None] * len(masks)
        return [HeldOutEvidence.of(self, runtime, mask, scores)
                for mask, scores in zip(masks, known, strict=True)]

    def _prior_rows(self) -> np.ndarray:
        """The pool rows the class prior's folds score (:meth:`prior_pool_rows`; every row)."""
        rows = self.prior_pool_rows()
        return np.arange(len(self.x_pool)) if rows is None else rows

    def fold_masks(self, n_folds: int) -> list[np.ndarray]:
        """Per fold of the class prior's cross-fitting: its labeled rows."""
        fold = fold_of(len(self.x_labeled), n_folds, self.entropy)
        return [fold == k for k in range(n_folds)]

    def _model_folds(self, n_folds: int, runtime: Runtime) -> Folds:
        """The model's cross-fitted scores (:func:`~puicl_model.estimator.prior.
        cross_fitted_scores`), computed once per ``n_folds``; where the portfolio chose on
        the folds, the rows it scored are read again and only the rest scored (the same
        bytes: a query row's score does not depend on the others scored with it)."""
        if n_folds not in self.model_folds:
            if n_folds == DEFAULT_FOLDS and self.fold_scores is not None:
                rows = self._prior_rows()
                evidence = self._fold_evidence(self.fold_masks(n_folds), runtime)
                self.model_folds[n_folds] = [fold.scores(rows, np.arange(fold.n_held))[::-1]
                                             for fold in evidence]
                self.fold_scores = None
            else:
                self.model_folds[n_folds] = cross_fitted_scores(
                    runtime.scorer(), self.planners, self.views, n_folds,
                    self.prior_pool_rows())
        return self.model_folds[n_folds]

    def prior_pool_rows(self) -> np.ndarray | None:
        """The pool rows the class prior's folds are scored against (None: every row), a
        sample where every pass shares its context (:func:`~.prior.prior_pool_rows`)."""
        if not all(planner.shares_context for planner in self.planners):
            return None
        return prior_pool_rows(len(self.x_pool), self.entropy)

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
            # (a folder saved before the evidence's own passes: the pool's own scores)
            pool = (self.pool_proba if self.evidence_pool_proba is None
                    else self.evidence_pool_proba)
            return [(self.held_proba, pool)]
        folds = self._model_folds(n_folds, runtime)
        if self.portfolio is None:
            return folds
        rows = self.prior_pool_rows() if len(folds[0][1]) != len(self.x_pool) else None
        return [self.portfolio.fold_proba(fold, mask, rows)
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

    def threshold_note(self, threshold: float, runtime: Runtime) -> str | None:
        """Where the cut ``threshold`` labels a share of the fitted pool negative that the
        data contradict, one line that says so (:func:`~.prior_report.threshold_note`), from
        the evidence already at hand and no pass of the model: the held-out positives' or the
        class prior's folds where they were scored, else the portfolio's learners' out-of-fold
        scores (the bound of the one that tells the labeled rows from the pool best)."""
        if threshold in self.threshold_notes:
            return self.threshold_notes[threshold]
        from puicl_model.estimator.prior_report import (
            held_out_auc,
            negative_share_bound,
            prior_report,
            threshold_note,
        )

        bound, report = None, None
        folds = None
        if self.x_held is not None or DEFAULT_FOLDS in self.model_folds:
            folds = self.prior_evidence(DEFAULT_FOLDS, runtime)
        if folds is not None:
            report = prior_report(self.pool_proba, folds, self.entropy)
            bound = report.lower_bound
        elif self.portfolio is not None and self.portfolio.labeled_scores:
            learner = max(self.portfolio.labeled_scores,
                          key=lambda kind: held_out_auc([(self.portfolio.labeled_scores[kind],
                                                          self.portfolio.pool_scores[kind])]))
            learner_fold = [(self.portfolio.labeled_scores[learner],
                             self.portfolio.pool_scores[learner])]
            bound = negative_share_bound(learner_fold, len(self.x_pool))
        note = threshold_note(self.pool_proba, threshold, bound, report)
        self.threshold_notes[threshold] = note
        return note

    def prior_cut(self, runtime: Runtime) -> tuple[np.ndarray, float]:
        return prior_cut(self.pool_proba, self.estimate_class_prior(DEFAULT_FOLDS, runtime))


def table_of(scorer: FittedScorer, what: str) -> FittedTable:
    """``scorer`` as the fitted table ``what`` needs; a classifier without its table: the one
    error (:func:`~puicl_model.estimator.fitted_scorer.no_table`)."""
    if not isinstance(scorer, FittedTable):
        raise no_table(what)
    return scorer

