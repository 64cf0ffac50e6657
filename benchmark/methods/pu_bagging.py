"""PU bagging, Mordelet & Vert, "A bagging SVM to learn from positive and unlabeled examples"
(Pattern Recognition Letters 37, 2014), over gradient-boosted trees.

Algorithm (their Alg. 1, transductive form): T times, draw a bootstrap sample of K rows from
the unlabeled pool U and fit a classifier of the labeled positives P (class 1) against that
sample (class 0). The score of an unlabeled row is the mean predicted P(class 1 | x) over the
classifiers whose bootstrap sample did not contain it (out of bag), so no row is scored by a
model that was trained on it as a negative. Default K = |P| (balanced bags, the usual
choice), T = 30.

Library: ``pulearn.BaggingPuClassifier`` (pulearn 0.2.0, BSD-3; scikit-learn's
BaggingClassifier adapted to PU: every bag = all of P + a bootstrap of ``max_samples`` rows of
U, out-of-bag scores in ``oob_decision_function_``), base estimator scikit-learn's
``HistGradientBoostingClassifier`` with scikit-learn's defaults (100 iterations, learning rate
0.1, 31 leaves, 20 rows per leaf). Why this library and not pu-toolbox: docs/benchmark.md.

Shim (the one adaptation): pulearn fits a base estimator that accepts ``sample_weight`` on all
rows, with weight = how often the row was drawn (0 out of bag), and only otherwise on the bag's
rows. With HistGradientBoostingClassifier the weighted path is 9–12× slower per bag in
scikit-learn 1.9 (its binning computes weighted percentiles, 254 per feature) and grows trees
whose ``min_samples_leaf`` counts the zero-weight rows. :class:`_BagRowsOnly` hides
``sample_weight`` from ``fit``, so pulearn takes its other branch: the estimator is fitted on
exactly the bag's rows (duplicates included) — Mordelet & Vert's training set. Setting
``weighted_bags: true`` restores pulearn's weighted path (to measure one against the other).

Labels: + where the out-of-bag score is ≥ 0.5 (pulearn's ``predict`` rule, the argmax of the
averaged class probabilities). With K = |P| the bag's class-1 share is ½, so score
g = f₊ / (f₊ + f_U) and P(y = + | x ∈ U) = α g / (1 − g) for α the positive share of U: the
0.5 cut is the Bayes rule at α = ½ (π = 0.5, §6.1) and labels too many rows positive when
π > 0.5, too few when π < 0.5. No class prior is estimated (π̂ = None).

Inputs: median imputation + standardization (:func:`~benchmark.methods.common.standardize`),
as for the other baselines: pulearn's input check rejects NaN (so the trees' own missing-value
handling is not used), and standardizing changes nothing for trees.

Threads: one OpenMP thread (``threadpool_limits``): on a busy 2-core machine the default
all-core OpenMP team made a 300-row fit 25× slower, and the runner uses one process per core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benchmark.methods.common import MethodOutput, check_inputs, standardize
from puicl_common.configio import require


class MissingLibraryError(RuntimeError):
    """A method's optional library is not installed (one line: what is missing, how to fix)."""


def _pulearn():
    try:
        import pulearn
    except ImportError as err:
        raise MissingLibraryError(
            "pu-bagging needs the pulearn package: pip install 'puicl[bench]'"
        ) from err
    return pulearn


@dataclass(frozen=True)
class PUBaggingConfig:
    n_bags: int = 30
    # unlabeled rows drawn (with replacement) per bag; None = the number of labeled positives
    bag_size: int | None = None
    # HistGradientBoostingClassifier settings (scikit-learn's defaults)
    max_iter: int = 100
    learning_rate: float = 0.1
    max_leaf_nodes: int = 31
    min_samples_leaf: int = 20
    # True: pulearn's own path for an estimator that takes sample_weight (fit on every row,
    # weight = times drawn); kept to measure the shim against it (docs/benchmark.md, "What the
    # baselines cost")
    weighted_bags: bool = False

    def validate(self) -> None:
        require(self.n_bags >= 1, "n_bags", f"must be >= 1, got {self.n_bags}")
        require(self.bag_size is None or self.bag_size >= 1, "bag_size",
                f"must be >= 1 (or null for the number of labeled positives), got "
                f"{self.bag_size}")
        require(self.max_iter >= 1, "max_iter", f"must be >= 1, got {self.max_iter}")
        require(self.learning_rate > 0, "learning_rate",
                f"must be positive, got {self.learning_rate}")
        require(self.max_leaf_nodes >= 2, "max_leaf_nodes",
                f"must be >= 2, got {self.max_leaf_nodes}")
        require(self.min_samples_leaf >= 1, "min_samples_leaf",
                f"must be >= 1, got {self.min_samples_leaf}")


def _bag_rows_only_estimator(config: PUBaggingConfig):
    """A HistGradientBoostingClassifier whose ``fit`` takes no ``sample_weight`` (see module
    docstring, "Shim"); everything else, parameters included, is the scikit-learn class."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    class _BagRowsOnly(HistGradientBoostingClassifier):
        def fit(self, X, y):
            return super().fit(X, y)

    estimator_cls = HistGradientBoostingClassifier if config.weighted_bags else _BagRowsOnly
    return estimator_cls(
        max_iter=config.max_iter,
        learning_rate=config.learning_rate,
        max_leaf_nodes=config.max_leaf_nodes,
        min_samples_leaf=config.min_samples_leaf,
    )


@dataclass(frozen=True)
class PUBagging:
    config: PUBaggingConfig = PUBaggingConfig()
    name: str = "pu-bagging"
    # bump when a code change alters results: invalidates cached replicates
    version: ClassVar[int] = 1

    def __post_init__(self) -> None:
        _pulearn()  # fail when the run is planned, not at its first replicate

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput:
        from threadpoolctl import threadpool_limits

        cfg = self.config
        X, labeled = check_inputs(X, s)
        n_unlabeled = int((~labeled).sum())
        if cfg.bag_size is None:
            bag_size = min(int(labeled.sum()), n_unlabeled)
        elif cfg.bag_size > n_unlabeled:
            raise ValueError(f"pu-bagging.bag_size = {cfg.bag_size} exceeds the "
                             f"{n_unlabeled} unlabeled rows of the task")
        else:
            bag_size = cfg.bag_size
        model = _pulearn().BaggingPuClassifier(
            estimator=_bag_rows_only_estimator(cfg),
            n_estimators=cfg.n_bags,
            max_samples=bag_size,
            bootstrap=True,
            oob_score=True,
            n_jobs=1,
            random_state=int(seed) % 2**32,
        )
        with threadpool_limits(limits=1):
            model.fit(standardize(X), labeled.astype(np.int64))
        # column 1 = the labeled class; positives are in every bag, so only U rows have one
        scores = np.asarray(model.oob_decision_function_[~labeled, 1], dtype=np.float64)
        never_out = int(np.isnan(scores).sum())
        if never_out:  # a settings problem (too few bags): one line in puicl-bench
            raise ValueError(
                f"pu-bagging: {never_out} unlabeled rows were in every one of the "
                f"{cfg.n_bags} bags and have no out-of-bag score; raise n_bags"
            )
        return MethodOutput(scores=scores, labels=(scores >= 0.5).astype(np.int8))
