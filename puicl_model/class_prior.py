"""Cross-fitted scores of the labeled positives, read by the class-prior estimators.

Every estimator of π (:mod:`puicl_model.prior`) compares how the model scores known positives
with how it scores the pool. The labeled positives cannot be scored as context rows, so they
are cross-fitted: split at random into ``K`` folds, each fold ``k`` is appended to the pool as
if it were unlabeled and scored by a transductive pass (the same kind of pass that scores the
pool) next to the other ``K − 1`` folds as labeled rows. One such scoring per fold gives, from
the same passes, the held-out positives' P(y=1) and the pool's P(y=1), so the two samples an
estimator compares differ only in their rows, never in how they were scored.

Cost: ``K`` scorings of (pool + n_labeled/K) rows next to (K − 1)/K of the labeled rows, each
about as long as the pool's own scoring (``predict_proba`` on the fitted pool), every ensemble
member included.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from puicl_model.inference import ViewRows

if TYPE_CHECKING:
    from puicl_model.classifier import PUICLClassifier

__all__ = ["DEFAULT_FOLDS", "PRIOR_FOLDS_TAG", "cross_fitted_scores", "fold_of"]

# the labeled positives' folds for estimate_class_prior: K = 3 and 5 gave the same π̂ errors on
# the development suite for 1.5x and 2.8x the time (docs/classifier.md)
DEFAULT_FOLDS = 2
# the spawn-key tag of the labeled rows' split in folds (puicl_model.planning's tags are 1-5)
PRIOR_FOLDS_TAG = 11

# per fold: (the held-out positives' P(y=1), the pool's P(y=1)), both from the same passes
Folds = list[tuple[np.ndarray, np.ndarray]]


def fold_of(n_labeled: int, n_folds: int, entropy: int) -> np.ndarray:
    """Each labeled row's fold in 0..n_folds−1: near-equal folds, drawn under the key
    ``(PRIOR_FOLDS_TAG, n_folds)`` of the fit's root seed."""
    if not 2 <= n_folds <= n_labeled // 2:
        raise ValueError(f"n_folds must be from 2 to half the labeled rows ({n_labeled // 2}), "
                         f"got {n_folds}")
    seed = np.random.SeedSequence(entropy, spawn_key=(PRIOR_FOLDS_TAG, n_folds))
    return np.random.default_rng(seed).permutation(n_labeled) % n_folds


def cross_fitted_scores(clf: PUICLClassifier, n_folds: int = DEFAULT_FOLDS) -> Folds:
    """Per fold of the fitted labeled positives: (the fold's P(y=1), the pool's P(y=1)), the
    fold appended to the pool and scored by its passes next to the other folds (every member
    of the ensemble, each with its own encoding of the rows)."""
    planner = clf.planner_
    n_pool = planner.n_pool
    fold = fold_of(len(clf.x_labeled_), n_folds, planner.entropy)
    scores: Folds = []
    for k in range(n_folds):
        held = fold == k
        views = [ViewRows(np.ascontiguousarray(view.x_labeled[~held]),
                          np.ascontiguousarray(np.concatenate([view.x_pool,
                                                               view.x_labeled[held]])))
                 for view in clf.views_]
        planners = [dataclasses.replace(p, n_labeled=int((~held).sum()),
                                        n_pool=n_pool + int(held.sum()))
                    for p in clf.planners_]
        proba, _ = clf._score(planners, views)
        scores.append((proba[n_pool:], proba[:n_pool]))
    return scores
