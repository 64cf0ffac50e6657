"""The passes that score a fitted table's positives as its pool's rows while those positives are
set apart from their context: the evidence of the portfolio's choice
(:mod:`puicl_model.estimator.portfolio`) and of π̂, where positives are held out of the passes
(a fifth of them, from 600 labeled) or where the class prior's folds are the evidence (each
fold in turn). Rows are scored as the choice asks for them, each once, so that a choice read
on a sample costs only that sample's rows, and π̂ scores only the rest.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from puicl_model.estimator.portfolio_gate import held_out_mask
from puicl_model.passes.inference import PassScorer
from puicl_model.passes.planning import PassPlanner, ViewRows
from puicl_model.passes.query_rows import ContextCaches

if TYPE_CHECKING:
    from puicl_model.estimator.fitted_scorer import Runtime
    from puicl_model.estimator.fitted_table import FittedTable

__all__ = ["HeldOutEvidence"]


@dataclass
class HeldOutEvidence:
    """The model's P(y = 1) of a table's held-out positives and of its pool's rows, by passes
    that set those positives apart from their context as the class prior's folds set a fold
    apart (:func:`~puicl_model.estimator.prior.cross_fitted_scores`): every member judged as
    fitted without them. Rows are scored as the choice asks for them, each once; where the
    passes share their contexts, only the rows asked for are scored, next to contexts kept
    between the asks."""

    planners: list[PassPlanner]
    views: list[ViewRows]
    n_pool: int
    scorer: PassScorer
    caches: ContextCaches | None
    known: np.ndarray  # per row of the evidence's pool (the pool, then the held-out): NaN unscored
    n_passes: int = 0

    @classmethod
    def of(cls, table: FittedTable, runtime: Runtime, held: np.ndarray | None = None,
           known: np.ndarray | None = None) -> HeldOutEvidence:
        """The passes that set ``held`` (a mask of the labeled rows; None: the positives
        held out of the passes) apart from their context, with the scores ``known`` (NaN
        where unscored) read, not scored again."""
        if held is None:
            held = held_out_mask(len(table.x_labeled), table.entropy)
            assert held is not None and int(held.sum()) == table.n_held_out
        n_held = int(held.sum())
        views = [view.with_fold_in_pool(held).rows() for view in table.views]
        planners = [dataclasses.replace(p, n_labeled=p.n_labeled - n_held,
                                        n_pool=p.n_pool + n_held) for p in table.planners]
        caches = ContextCaches(runtime.cache_bytes) if runtime.cache_bytes else None
        if known is None:
            known = np.full(table.n_pool + n_held, np.nan)
        return cls(planners, views, table.n_pool, runtime.scorer(), caches, known.copy())

    @property
    def n_held(self) -> int:
        return len(self.known) - self.n_pool

    def scores(self, pool_rows: np.ndarray, held_rows: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray]:
        """The model's P(y = 1) of the pool rows ``pool_rows`` and of the held-out positives
        ``held_rows`` (indices among them)."""
        asked = np.concatenate([pool_rows, self.n_pool + np.asarray(held_rows, dtype=np.int64)])
        missing = asked[np.isnan(self.known[asked])]
        if len(missing):
            if all(planner.shares_context for planner in self.planners):
                proba, passes = self.scorer(self.planners, self.views, rows=missing,
                                            caches=self.caches)
                self.known[missing] = proba
            else:  # every row of the passes at once: they are all scored anyway
                self.known[:], passes = self.scorer(self.planners, self.views)
            self.n_passes += passes
        return self.known[pool_rows], self.known[self.n_pool + np.asarray(held_rows,
                                                                         dtype=np.int64)]
