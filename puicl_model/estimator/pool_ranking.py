"""The ranking that a shared context's pool rows are drawn by: which rows look least positive.

A pool larger than one pass can be scored through one shared context per member and feature
group (``large_pool="shared"``, :mod:`puicl_model.passes.planning`). Half of that context's
pool rows come from the third of the pool that ranks least positive here, so that a pool
almost all positives still shows the model the negatives it was trained to see (pools of
10-90 % negatives; docs/recipe.md, "Training on large tasks, and pools almost all positive").

The ranking is a logistic regression of the labeled rows against the pool, cross-fitted over
every row (:class:`~puicl_model.estimator.learners.CrossFittedLearner`), on the model's own
encoding of the table: each row, labeled or not, is ranked by models that never saw it, so a
labeled row that the class prior's folds move into the pool has its score too. Its folds are
drawn under the key ``(seed_keys.RANKING,)`` of the fit's root seed.
"""

from __future__ import annotations

import numpy as np

from puicl_model.estimator.ensemble import Ensemble, with_ranking
from puicl_model.estimator.learners import LOGISTIC, CrossFittedLearner
from puicl_model.passes import seed_keys
from puicl_model.passes.settings import InferenceSettings

__all__ = ["pool_ranking", "ranked"]


def pool_ranking(x_labeled: np.ndarray, x_pool: np.ndarray, entropy: int,
                 n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold log-odds of P(labeled | x) of the labeled rows, then of the pool: low where
    a row looks least positive."""
    seed = np.random.SeedSequence(entropy, spawn_key=(seed_keys.RANKING,))
    learner = CrossFittedLearner(LOGISTIC, int(seed.generate_state(1)[0]), n_threads=n_threads)
    return learner.fit(x_labeled, x_pool)


def ranked(ensemble: Ensemble, settings: InferenceSettings, entropy: int,
           n_threads: int | None = None) -> Ensemble:
    """The fitted ensemble with its rows' ranking where a pass may share a context: with
    ``large_pool="shared"``, where the labeled rows and the pool together exceed
    ``single_pass_limit`` (the class prior's folds move labeled rows into the pool, so a
    fold's pool can be larger than one pass when the pool alone is not)."""
    rows = ensemble.views[0]
    if (settings.large_pool != "shared"
            or len(rows.x_labeled) + len(rows.x_pool) <= settings.single_pass_limit):
        return ensemble
    return with_ranking(ensemble, *pool_ranking(rows.x_labeled, rows.x_pool, entropy, n_threads))
