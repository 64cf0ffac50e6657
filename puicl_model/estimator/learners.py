"""The portfolio's classical learners: classifiers of labeled (1) against unlabeled (0) rows,
cross-fitted over every row, on an encoding of their own.

Under SCAR, P(labeled | x) ranks rows as P(y = 1 | x) does (Elkan & Noto, KDD 2008), so such a
classifier is a PU learner; cross-fitting scores every row by models that never saw it, so its
scores of labeled rows are held-out evidence beside the pool's
(:mod:`puicl_model.estimator.portfolio` reads them). ``logistic`` is a logistic regression,
``boosted`` scikit-learn's histogram gradient boosting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from puicl_model.passes import seed_keys

__all__ = ["BOOSTED", "LEARNER_FOLDS", "LOGISTIC", "CrossFittedLearner", "learner_encoding",
           "log_odds"]

LOGISTIC, BOOSTED = "logistic", "boosted"
# spawn-key tags of the learners' fold splits
LEARNER_TAGS = {LOGISTIC: seed_keys.LOGISTIC_FOLDS, BOOSTED: seed_keys.BOOSTED_FOLDS}
# the learners' cross-fitting folds
LEARNER_FOLDS = 5
# clip of probabilities before their log-odds are taken
_EPS = 1e-6


def learner_encoding(keep_columns: Any = None) -> Any:
    """The learners' own table encoding (a
    :class:`~puicl_model.estimator.preprocessing.TablePreprocessor`):
    categories one-hot, numbers as given (then centred and scaled), a "was missing" column for
    every column with missing values. The model's normal scores of ranks would bend a linear
    learner's view of an amount."""
    from puicl_model.estimator.preprocessing import TablePreprocessor

    return TablePreprocessor(categorical="onehot", missing="median+indicator", numeric="standard",
                             keep_columns=keep_columns)


def log_odds(proba: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(proba, dtype=np.float64), _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


def _row_decision(model: Any, x: np.ndarray) -> np.ndarray:
    """A fitted learner's log-odds of each row of ``x``, the same bits whatever other rows are
    scored with it: a linear model's products summed row by row (a matrix product's blocking,
    and so its last bits, follows the number of rows); the trees score each row on its own."""
    if hasattr(model, "coef_"):
        return (x * model.coef_[0]).sum(axis=1) + model.intercept_[0]
    return model.decision_function(x)


@dataclass
class CrossFittedLearner:
    """A classifier of labeled (1) against unlabeled (0) rows, cross-fitted over every row:
    ``fit`` returns the out-of-fold log-odds of P(labeled | x) of the labeled rows and of the
    pool, ``decision`` scores other rows by the fold models' mean log-odds."""

    kind: str  # LOGISTIC or BOOSTED
    entropy: int
    folds: int = LEARNER_FOLDS
    # OpenMP threads of the boosting (None: the library's default, every core). On a busy
    # machine a team of spinning threads per core made a fit tens of times slower
    n_threads: int | None = None
    models_: list[Any] = field(default_factory=list)

    def _threads(self) -> Any:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=self.n_threads)

    def _estimator(self, seed: int) -> Any:
        if self.kind == LOGISTIC:
            from sklearn.linear_model import LogisticRegression

            return LogisticRegression(C=1.0, max_iter=1000)
        from sklearn.ensemble import HistGradientBoostingClassifier

        # no early stopping: it would hold out a random tenth of each fold's rows
        return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1,
                                              early_stopping=False, random_state=seed)

    def fit(self, x_labeled: np.ndarray, x_pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from sklearn.model_selection import StratifiedKFold

        x = np.vstack([x_labeled, x_pool]).astype(np.float64)
        target = np.r_[np.ones(len(x_labeled), np.int64), np.zeros(len(x_pool), np.int64)]
        seed = int(np.random.SeedSequence(self.entropy, spawn_key=(LEARNER_TAGS[self.kind],))
                   .generate_state(1)[0] % 2**31)
        split = StratifiedKFold(n_splits=self.folds, shuffle=True, random_state=seed)
        scores = np.empty(len(x))
        self.models_ = []
        with self._threads():
            for train, held in split.split(x, target):
                model = self._estimator(seed).fit(x[train], target[train])
                scores[held] = _row_decision(model, x[held])
                self.models_.append(model)
        return scores[: len(x_labeled)], scores[len(x_labeled):]

    def decision(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        with self._threads():
            return np.mean([_row_decision(model, x) for model in self.models_], axis=0)
