"""The classifier's questions about the class prior π (a mixin of
:class:`~puicl_model.estimator.classifier.PUICLClassifier`, by role): π̂
(:mod:`~.prior`), what the data identify about π (:mod:`~.prior_report`), the scores both
read, the fitted pool's and the labeled positives' held out of the passes, the page that shows
them (:meth:`ClassPriorMethods.plot_report`) and the check of ``predict``'s cut against them.

Each question goes to the fitted object (:mod:`~.fitted_table`), which computes its scores once;
a classifier loaded without its table answers π̂ as estimated before the save, and refuses the
rest in one line (:class:`~.fitted_scorer.NoTrainingDataError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from puicl_model.estimator.fitted_scorer import FittedScorer, Runtime
from puicl_model.estimator.fitted_table import FittedTable, table_of
from puicl_model.estimator.prior import DEFAULT_FOLDS
from puicl_model.estimator.prior_report import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_DELTA,
    DEFAULT_LEVEL,
    ClassPriorReport,
    prior_report,
)
from puicl_model.passes.planning import PassPlanner

if TYPE_CHECKING:
    from puicl_model.estimator.report import Report

__all__ = ["ClassPriorMethods"]


class ClassPriorMethods:
    """π̂, its report and the scores they read, for a fitted classifier (which provides
    ``fitted_``, ``planner_``, ``_check_fitted`` and ``_runtime``)."""

    fitted_: FittedScorer
    planner_: PassPlanner

    def _check_fitted(self) -> None:
        raise NotImplementedError

    def _runtime(self) -> Runtime:
        raise NotImplementedError

    def estimate_class_prior(self, n_folds: int = DEFAULT_FOLDS) -> float:
        """π̂: the estimated negative share of the fitted unlabeled pool.

        The labeled positives are cross-fitted (:mod:`puicl_model.estimator.prior`): split in
        ``n_folds`` folds, each fold is scored as unlabeled rows next to the other folds, by
        the same passes that score the pool. The rule on those scores and the pool's is
        :func:`puicl_model.estimator.prior.class_prior_estimate` (docs/classifier_measurements.md
        measures it against other estimators). With fewer than ``MIN_LABELED_FOR_ESTIMATES``
        labeled positives, the mean of P(y=0) over the pool.
        Costs ``n_folds`` extra scorings of the pool, computed once per ``n_folds``.
        """
        self._check_folds(n_folds)
        known = self.fitted_.class_prior.get(n_folds)  # (without the table: those saved)
        if known is not None:
            return known
        table = table_of(self.fitted_, f"estimate_class_prior(n_folds={n_folds})")
        return table.estimate_class_prior(n_folds, self._runtime())

    def _check_folds(self, n_folds: int) -> None:
        self._check_fitted()
        if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
            raise ValueError(f"n_folds must be an integer >= 2, got {n_folds!r}")

    def fitted_pool_proba(self) -> np.ndarray:
        """P(y=1) of every unlabeled row the classifier was fitted on, in their order in
        ``fit``'s table (where the pool was sampled, ``pool_sample``, the sample's rows): the
        scores that ``estimate_class_prior`` and the prior cut read, the model's or the chosen
        portfolio blend's. Computed once, in ``fit``; a copy."""
        self._check_fitted()
        return table_of(self.fitted_, "fitted_pool_proba()").pool_proba.copy()

    def held_out_scores(self, n_folds: int = DEFAULT_FOLDS,
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per fold of the labeled positives: (the fold's P(y=1), the fitted pool's P(y=1)),
        the fold scored as unlabeled rows next to the other folds, by the passes that score the
        pool (:mod:`puicl_model.estimator.prior`): the evidence π̂ and the portfolio's choice
        read. Where labeled positives were held out of every pass (``n_held_out_`` > 0), they
        are the one fold and ``n_folds`` is not used. Computed once per ``n_folds`` (each
        costs ``n_folds`` scorings of the pool); copies."""
        self._check_folds(n_folds)
        table = table_of(self.fitted_, "held_out_scores()")
        return [(held.copy(), pool.copy())
                for held, pool in table.held_out_scores(n_folds, self._runtime())]

    def class_prior_report(self, level: float = DEFAULT_LEVEL,
                           n_bootstrap: int = DEFAULT_BOOTSTRAP,
                           n_folds: int = DEFAULT_FOLDS,
                           delta: float = DEFAULT_DELTA) -> ClassPriorReport:
        """π as far as the data identify it
        (:class:`puicl_model.estimator.prior_report.ClassPriorReport`):
        the identified lower bound, the point π̂ (``estimate_class_prior(n_folds)``), π̂'s
        bootstrap interval at ``level`` and the upper end to read π up to, and a flag with a
        one-line note where π is poorly identified. Reads the scores ``estimate_class_prior``
        computes (no further pass of the model): ``n_bootstrap`` resamples of them.
        """
        self._check_folds(n_folds)
        table = table_of(self.fitted_, "class_prior_report()")
        runtime = self._runtime()
        table.estimate_class_prior(n_folds, runtime)  # scores the folds once
        return prior_report(table.pool_proba, table.prior_evidence(n_folds, runtime),
                            self.planner_.entropy, level=level, n_bootstrap=n_bootstrap,
                            delta=delta)

    def _check_the_cut(self, threshold: float, runtime: Runtime) -> None:
        """Warn once per fit and threshold (:class:`ThresholdWarning`) where the cut labels a
        share of the fitted pool negative that the data contradict (``FittedTable.
        threshold_note``; a classifier saved without its table has no pool to check)."""
        from puicl_model.estimator.prior_report import ThresholdWarning

        if not isinstance(self.fitted_, FittedTable) or threshold in self.fitted_.threshold_notes:
            return
        note = self.fitted_.threshold_note(threshold, runtime)
        if note is not None:
            import warnings

            warnings.warn(f"predict: {note}", ThresholdWarning, stacklevel=4)

    def plot_report(self, path: str | Path | None = None) -> Report:
        """A page a person looks at (:mod:`puicl_model.estimator.report`): the held-out labeled
        positives' P(y=1) against the pool's, π's bound, estimate, interval and upper end, and
        what the portfolio chose (or why the model alone scores the table). With ``path`` the
        self-contained HTML page is written there and its PNG figures beside it. Needs
        matplotlib (``pip install 'puicl[report]'``); reads ``class_prior_report()``'s scores."""
        from puicl_model.estimator.report import plot_report

        self._check_fitted()
        table_of(self.fitted_, "plot_report()")
        return plot_report(self, path)
