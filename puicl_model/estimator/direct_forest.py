"""PU bagging's random forests, grown on scikit-learn's own tree builder without the Python that
its ``RandomForestClassifier`` runs around every tree.

At the paper's size a bag's forest trains on a few hundred rows. scikit-learn builds such a tree
in about 0.1 ms, but its forest spends about ten times that around each one: it clones and
validates an estimator per tree, checks the rows and targets again, runs a joblib loop, and
seeds two fresh ``RandomState`` objects, each of which first gathers entropy from the system.
PU bagging fits fifty trees per table, so that overhead was most of the portfolio's time beside
the model (docs/performance.md, "The default at the paper's size").

:class:`DirectForest` repeats what the forest does for each tree, in the same order and with the
same draws: the trees' seeds from ``RandomState(seed)``, each tree's bootstrap counts as its
sample weights, the tree's splitter seeded by the tree's seed. It then calls the same builder.
The fitted trees are scikit-learn's ``DecisionTreeClassifier`` objects, and the forest's
probability is their mean, summed in tree order as scikit-learn sums it.

The builder's signatures are private to scikit-learn and may change with a release, so nothing
is assumed: :func:`follows_scikit_learn` fits both forests on seeded tables once per process and
compares their trees and probabilities bit for bit. Where they differ, or the builder is not
found, the learners use ``RandomForestClassifier`` itself. The scores are then the same bytes,
only slower. Rows with missing or infinite values also go to scikit-learn's forest, which
decides what they mean; the learners' own encoding never makes them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

__all__ = ["DirectForest", "follows_scikit_learn", "forest", "scikit_learn_forest"]

# scikit-learn's bound on a tree's seed (its forests draw them below int32's maximum)
_SEED_BOUND = int(np.iinfo(np.int32).max)


@dataclass
class DirectForest:
    """A binary random forest that fits and scores as ``RandomForestClassifier(
    n_estimators=trees, min_samples_leaf=leaf, random_state=seed)`` does, bit for bit (with the
    forest's other settings at their defaults: bootstrap rows, the square root of the columns
    at each split, Gini impurity, no depth limit)."""

    trees: int
    leaf: int
    seed: int
    estimators_: list[DecisionTreeClassifier] = field(default_factory=list)
    classes_: np.ndarray | None = None
    n_outputs_: int = 1
    n_features_in_: int = 0

    def fit(self, x: np.ndarray, y: np.ndarray) -> DirectForest:
        rows = np.ascontiguousarray(x, dtype=np.float32)
        if rows.ndim != 2 or not np.isfinite(rows).all():
            # scikit-learn's forest decides what missing and infinite values mean
            self._adopt(scikit_learn_forest(self.trees, self.leaf, self.seed).fit(x, y))
            return self
        classes, encoded = np.unique(np.asarray(y), return_inverse=True)
        targets = np.ascontiguousarray(encoded.reshape(-1, 1), dtype=np.float64)
        self.classes_ = classes
        self.n_features_in_ = rows.shape[1]
        draws = np.random.RandomState()  # reseeded per draw: a fresh one gathers entropy first
        draws.seed(self.seed)
        tree_seeds = [draws.randint(_SEED_BOUND) for _ in range(self.trees)]
        self.estimators_ = [self._tree(rows, targets, len(classes), tree_seed, draws)
                            for tree_seed in tree_seeds]
        return self

    def _tree(self, rows: np.ndarray, targets: np.ndarray, n_classes: int, tree_seed: int,
              draws: np.random.RandomState) -> DecisionTreeClassifier:
        """One tree as the forest grows it: bootstrap counts drawn from ``RandomState(
        tree_seed)``, then a splitter seeded by a fresh ``RandomState(tree_seed)`` again."""
        from sklearn.tree import DecisionTreeClassifier
        from sklearn.tree._criterion import Gini
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree

        n_rows, n_columns = rows.shape
        draws.seed(tree_seed)
        counts = np.bincount(draws.randint(0, n_rows, n_rows), minlength=n_rows)
        weights = counts.astype(np.float64)
        draws.seed(tree_seed)
        class_counts = np.array([n_classes], dtype=np.intp)
        max_features = max(1, int(np.sqrt(n_columns)))
        splitter = BestSplitter(Gini(1, class_counts), max_features, self.leaf, 0.0, draws, None)
        tree = Tree(n_columns, class_counts, 1)
        DepthFirstTreeBuilder(splitter, max(2, 2 * self.leaf), self.leaf, 0.0, _SEED_BOUND,
                              0.0).build(tree, rows, targets, weights, None)
        fitted = DecisionTreeClassifier(min_samples_leaf=self.leaf, max_features="sqrt",
                                        random_state=tree_seed)
        fitted.tree_, fitted.n_outputs_, fitted.n_features_in_ = tree, 1, n_columns
        fitted.classes_, fitted.n_classes_ = np.arange(n_classes, dtype=np.float64), n_classes
        fitted.max_features_ = max_features
        return fitted

    def _adopt(self, fitted: RandomForestClassifier) -> None:
        self.estimators_ = list(fitted.estimators_)
        self.classes_ = fitted.classes_
        self.n_features_in_ = int(fitted.n_features_in_)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Each class's probability per row: the trees' probabilities summed in tree order,
        divided by their number. A tree's probabilities are its leaves' values, read from the
        tree itself: what the estimator's ``predict_proba`` adds is checks of the rows, which
        this forest makes once for all its trees."""
        rows = np.ascontiguousarray(x, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.n_features_in_:
            raise ValueError(f"expected rows of {self.n_features_in_} columns, got shape "
                             f"{rows.shape}")
        n_classes = len(self.classes_)
        total = np.zeros((len(rows), n_classes), dtype=np.float64)
        for estimator in self.estimators_:
            total += estimator.tree_.predict(rows)[:, :n_classes]
        total /= len(self.estimators_)
        return total


def _check_tables() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Seeded tables for :func:`follows_scikit_learn`: (training rows, targets, rows to score).
    Ties and repeated rows, a rare class, and one column."""
    rng = np.random.default_rng(20261127)
    tables = []
    for n_rows, n_columns, share in ((120, 7, 0.5), (90, 3, 0.15), (60, 1, 0.4)):
        x = rng.normal(size=(n_rows, n_columns))
        x[: n_rows // 4] = np.round(x[: n_rows // 4])  # ties
        x[-5:] = x[:5]  # repeated rows
        y = (rng.random(n_rows) < share).astype(np.int64)
        y[:2] = [0, 1]  # both classes
        tables.append((x, y, rng.normal(size=(200, n_columns))))
    return tables


@functools.cache
def follows_scikit_learn(trees: int = 10, leaf: int = 10) -> bool:
    """Whether :class:`DirectForest` grows the trees and gives the probabilities of
    scikit-learn's ``RandomForestClassifier``, bit for bit, with this scikit-learn (checked once
    per process on seeded tables; any error in the builder's calls counts as no)."""
    try:
        for seed, (x, y, rows) in enumerate(_check_tables()):
            direct = DirectForest(trees, leaf, seed).fit(x, y)
            reference = scikit_learn_forest(trees, leaf, seed).fit(x, y)
            if direct.predict_proba(rows).tobytes() != reference.predict_proba(rows).tobytes():
                return False
            for ours, theirs in zip(direct.estimators_, reference.estimators_, strict=True):
                for name in ("children_left", "feature", "threshold", "value"):
                    if getattr(ours.tree_, name).tobytes() != getattr(theirs.tree_, name).tobytes():
                        return False
    except Exception:  # a changed private signature: scikit-learn's forest instead
        return False
    return True


def scikit_learn_forest(trees: int, leaf: int, seed: int) -> RandomForestClassifier:
    """scikit-learn's own forest of the same settings, on one job (the bags already run side by
    side)."""
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=trees, min_samples_leaf=leaf, n_jobs=1,
                                  random_state=seed)


def forest(trees: int, leaf: int, seed: int) -> DirectForest | RandomForestClassifier:
    """An unfitted random forest of ``trees`` trees of at least ``leaf`` rows a leaf, seeded by
    ``seed``: a :class:`DirectForest` where it follows this scikit-learn, else scikit-learn's
    own."""
    if follows_scikit_learn(trees, leaf):
        return DirectForest(trees, leaf, seed)
    return scikit_learn_forest(trees, leaf, seed)
