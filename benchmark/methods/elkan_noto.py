"""Elkan & Noto, "Learning classifiers from only positive and unlabeled data" (KDD 2008).

A calibrated classifier g(x) ≈ P(labeled | x) is trained on labeled positives (1) against the
unlabeled pool (0); c = mean of g over held-out labeled positives estimates P(labeled | x, +)
(their estimator e₁). In the case-control setting of this benchmark (P and U drawn
separately, U = α f₊ + (1 − α) f₋), Bayes' rule gives for an unlabeled row

    P(y = + | x, x ∈ U) = ((1 − c) / c) · g(x) / (1 − g(x)),  clipped to [0, 1]

(BASELINES.md; the ``pulearn`` package returns g/c instead, which exceeds 1). Label + where
that probability is ≥ 0.5. Score = g(x): it ranks rows exactly as the unclipped probability
does, whereas the clipped one ties every row above the clip at 1 (which would turn the AUC
into a coin toss among them). π̂ = 1 − α̂ with α̂ = ((1 − c)/c) · n_P / n_U, the share of
positives in U implied by c (c = n_P / (n_P + α n_U) for the training proportions).

Classifier: logistic regression (scikit-learn, lbfgs, C = 1) on standardized features — a
probabilistic classifier that is calibrated by construction, as the method requires.

Held-out scoring: every row (P and U) gets g from a model that did not see it, by seeded
5-fold cross-fitting stratified on s. c is the mean out-of-fold g over P (Elkan & Noto's
validation-set estimate, using every positive once), and each unlabeled row is scored out of
fold too; each fold's model keeps the task's n_P : n_U proportion.

Deviations: Elkan & Noto used an SVM with Platt scaling. On these tasks (1 : 2–1 : 4 P : U,
heavily overlapping because U contains positives) the RBF SVM ranks poorly — AUC 0.72 on the
easy synthetic test task whose Bayes AUC is ≈ 0.96, against 0.95 for logistic regression —
and a flexible classifier scored on its own training rows pushes the unlabeled positives down
(they were trained as class 0), hence the cross-fitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benchmark.methods.common import MethodOutput, check_inputs, standardize
from puicl_common.configio import require


@dataclass(frozen=True)
class ElkanNotoConfig:
    C: float = 1.0
    folds: int = 5

    def validate(self) -> None:
        require(self.C > 0, "C", f"must be positive, got {self.C}")
        require(self.folds >= 2, "folds", f"must be >= 2, got {self.folds}")


@dataclass(frozen=True)
class ElkanNoto:
    config: ElkanNotoConfig = ElkanNotoConfig()
    name: str = "elkan-noto"
    # bump when a code change alters results: invalidates cached replicates
    version: ClassVar[int] = 2

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold

        cfg = self.config
        X, labeled = check_inputs(X, s)
        Z = standardize(X)
        target = labeled.astype(np.int64)
        g = np.empty(len(Z))
        folds = StratifiedKFold(n_splits=cfg.folds, shuffle=True,
                                random_state=int(seed % (2**31)))
        for train, held_out in folds.split(Z, target):
            model = LogisticRegression(C=cfg.C, max_iter=2000)
            model.fit(Z[train], target[train])
            g[held_out] = model.predict_proba(Z[held_out])[:, 1]
        c = float(np.clip(g[labeled].mean(), 1e-6, 1.0))
        g_u = np.clip(g[~labeled], 1e-6, 1 - 1e-6)
        prob = np.clip((1 - c) / c * g_u / (1 - g_u), 0.0, 1.0)
        alpha = float(np.clip((1 - c) / c * labeled.sum() / (~labeled).sum(), 0.0, 1.0))
        return MethodOutput(
            scores=g_u,
            labels=(prob >= 0.5).astype(np.int8),
            pi_hat=1.0 - alpha,
            extras={"c": c},
        )
