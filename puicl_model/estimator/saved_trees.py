"""The portfolio's trees as plain arrays, for a saved classifier
(:mod:`puicl_model.estimator.saved_model`): gradient-boosted trees (:class:`BoostedTrees`) and
PU bagging's random forests (:class:`ForestTrees`).

scikit-learn's ``HistGradientBoostingClassifier`` keeps its trees in private objects that have
no public way to be rebuilt, and pickling them is what the project refuses. Its prediction on
raw rows is simple, though: start from the baseline log-odds and add, tree by tree in the order
they were grown, the value of the leaf each row reaches, where a split sends a row left when
its value is at most the threshold, and a missing value the way the split learned. This module
stores each tree's node arrays and does exactly that, in the same order and in float64, so the
scores are the same bits (``tests/model/test_saved_model.py`` compares them). Categorical splits
are not supported: the portfolio's encoding has none (one-hot columns are numbers).

A random forest's probability is as simple: each tree sends a row down to a leaf (a row's
values as float32, as scikit-learn reads them, at most the threshold going left, a missing
value the way the split learned), the leaves' class-1 shares are summed tree by tree and the
sum divided by the number of trees; :class:`ForestTrees` does the same, and its log-odds are
those :func:`puicl_model.estimator.learners.row_decision` takes of the fitted forest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

__all__ = ["BoostedTrees", "ForestTrees"]

# the node fields a prediction reads
_FIELDS = ("value", "feature_idx", "num_threshold", "missing_go_to_left", "left", "right",
           "is_leaf")


def _arrays_problem(trees: object, whole: dict[str, type], per_node: dict[str, type]
                    ) -> str | None:
    """What is wrong with the dtypes and lengths of saved trees' arrays: each of ``whole``,
    ``starts`` and ``per_node`` a 1-d array of its dtype, each of ``per_node`` as long as the
    first of them. None: nothing."""
    n = None
    for name, dtype in {**whole, "starts": np.int64, **per_node}.items():
        array = getattr(trees, name)
        if not (isinstance(array, np.ndarray) and array.dtype == dtype and array.ndim == 1):
            return f"trees whose {name} is no 1-d {np.dtype(dtype).name} array"
        if name in per_node:
            n = len(array) if n is None else n
            if len(array) != n:
                return f"trees whose {name} has {len(array)} nodes, not {n}"
    return None


def _layout_problem(starts: np.ndarray, inner: np.ndarray, left: np.ndarray, right: np.ndarray,
                    feature: np.ndarray, n_features: int) -> str | None:
    """What keeps node arrays (trees one after the other from ``starts``) from being trees
    that a row of ``n_features`` walks down to a leaf: starts that do not split the nodes, an
    ``inner`` node's child out of its tree or before it (which could loop forever: a fitted
    tree numbers each node before its children), or a split on a feature beyond the row's.
    None: nothing."""
    n = len(inner)
    ends = np.r_[starts[1:], n]
    if not len(starts) or starts[0] != 0 or not (ends > starts).all() or ends[-1] != n:
        return "trees whose starts do not split the nodes"
    tree = np.repeat(np.arange(len(starts)), ends - starts)
    local, size = np.arange(n) - starts[tree], (ends - starts)[tree]
    for child in (left, right):
        if ((child[inner] <= local[inner]) | (child[inner] >= size[inner])).any():
            return "trees whose nodes point out of their tree, or back up it"
    if ((feature[inner] < 0) | (feature[inner] >= n_features)).any():
        return f"trees that split on features beyond the {n_features} they are given"
    return None


def _leaves(x: np.ndarray, start: int, inner: np.ndarray, feature: np.ndarray,
            threshold: np.ndarray, missing_go_to_left: np.ndarray, left: np.ndarray,
            right: np.ndarray) -> np.ndarray:
    """The node (of all trees' nodes) where each row of ``x`` ends in the tree whose root is
    ``start``: at an ``inner`` node a row goes left where its value of the node's feature is at
    most the threshold, or is missing and the node sends missing values left."""
    node = np.zeros(len(x), dtype=np.int64)
    rows = np.arange(len(x))
    while True:
        at = start + node
        going = inner[at]
        if not going.any():
            return at
        at, which = at[going], rows[going]
        seen = x[which, feature[at]]
        go_left = np.where(np.isnan(seen), missing_go_to_left[at] == 1, seen <= threshold[at])
        node[which] = np.where(go_left, left[at], right[at])


@dataclass
class BoostedTrees:
    """A fitted binary ``HistGradientBoostingClassifier`` as arrays: every tree's nodes, one
    after the other (``starts[t]``: tree t's first node; its root)."""

    baseline: np.ndarray  # float64 [1]: the log-odds every row starts from
    starts: np.ndarray  # int64 [n_trees]
    value: np.ndarray  # float64 [n_nodes]
    feature_idx: np.ndarray  # int64
    num_threshold: np.ndarray  # float64
    missing_go_to_left: np.ndarray  # uint8
    left: np.ndarray  # int64, within the tree
    right: np.ndarray  # int64, within the tree
    is_leaf: np.ndarray  # uint8

    @classmethod
    def from_sklearn(cls, model: HistGradientBoostingClassifier) -> BoostedTrees:
        trees = [iteration[0].nodes for iteration in model._predictors]
        if model.n_trees_per_iteration_ != 1 or any(t["is_categorical"].any() for t in trees):
            raise ValueError("only binary boosted trees without categorical splits are saved")
        sizes = np.array([len(tree) for tree in trees], dtype=np.int64)
        starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
        fields = {name: np.concatenate([tree[name] for tree in trees]) for name in _FIELDS}
        return cls(np.asarray(model._baseline_prediction, dtype=np.float64).reshape(1),
                   starts, fields["value"].astype(np.float64),
                   fields["feature_idx"].astype(np.int64),
                   fields["num_threshold"].astype(np.float64),
                   fields["missing_go_to_left"].astype(np.uint8),
                   fields["left"].astype(np.int64), fields["right"].astype(np.int64),
                   fields["is_leaf"].astype(np.uint8))

    def check_against(self, model: HistGradientBoostingClassifier) -> None:
        """Refuse arrays that do not score as ``model`` does (the same bits on seeded rows,
        missing values among them): the private layout read by :meth:`from_sklearn` is
        scikit-learn's to change, and a version that changed it must stop the save, not write
        other trees."""
        import sklearn

        rng = np.random.default_rng(0)
        x = rng.normal(scale=2.0, size=(256, int(model.n_features_in_)))
        x[rng.random(x.shape) < 0.05] = np.nan
        if not np.array_equal(self.decision_function(x), model.decision_function(x)):
            raise ValueError(f"scikit-learn {sklearn.__version__} keeps its boosted trees in a "
                             "form this puicl does not read; the classifier cannot be saved")

    def problem(self, n_features: int) -> str | None:
        """What keeps these arrays (read from a saved folder) from being trees that a row of
        ``n_features`` walks down to a leaf: a dtype, a length, a node index out of its tree,
        or a child before its parent, which could loop forever (a fitted tree numbers each
        node before its children). None: nothing."""
        per_node = dict.fromkeys(("value", "num_threshold"), np.float64) | dict.fromkeys(
            ("feature_idx", "left", "right"), np.int64) | dict.fromkeys(
            ("missing_go_to_left", "is_leaf"), np.uint8)
        problem = _arrays_problem(self, {"baseline": np.float64}, per_node)
        if problem is None and len(self.baseline) != 1:
            return "trees whose starts do not split the nodes"
        return problem or _layout_problem(self.starts, self.is_leaf == 0, self.left, self.right,
                                          self.feature_idx, n_features)

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        """The log-odds of P(labeled | x) per row, as the fitted model gives them."""
        x = np.asarray(x, dtype=np.float64)
        raw = np.zeros(len(x), dtype=np.float64)
        raw += self.baseline[0]
        inner = self.is_leaf == 0
        for start in self.starts:
            raw += self.value[_leaves(x, int(start), inner, self.feature_idx, self.num_threshold,
                                      self.missing_go_to_left, self.left, self.right)]
        return raw


@dataclass
class ForestTrees:
    """A fitted binary ``RandomForestClassifier`` as arrays: every tree's nodes, one after the
    other (``starts[t]``: tree t's first node; its root). A leaf's ``left`` is −1."""

    starts: np.ndarray  # int64 [n_trees]
    feature: np.ndarray  # int64 [n_nodes]
    threshold: np.ndarray  # float64
    missing_go_to_left: np.ndarray  # uint8
    left: np.ndarray  # int64, within the tree; -1 at a leaf
    right: np.ndarray  # int64, within the tree
    share: np.ndarray  # float64: a leaf's probability of class 1, as the tree predicts it

    @classmethod
    def from_sklearn(cls, model: RandomForestClassifier) -> ForestTrees:
        if list(model.classes_) != [0, 1] or model.n_outputs_ != 1:
            raise ValueError("only forests of one output and the classes 0 and 1 are saved")
        trees = [estimator.tree_ for estimator in model.estimators_]
        sizes = np.array([tree.node_count for tree in trees], dtype=np.int64)
        starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)

        def joined(name: str, dtype: type) -> np.ndarray:
            return np.concatenate([getattr(tree, name) for tree in trees]).astype(dtype)

        return cls(starts, joined("feature", np.int64), joined("threshold", np.float64),
                   joined("missing_go_to_left", np.uint8), joined("children_left", np.int64),
                   joined("children_right", np.int64),
                   np.concatenate([tree.value[:, 0, 1] for tree in trees]).astype(np.float64))

    def check_against(self, model: RandomForestClassifier) -> None:
        """Refuse arrays that do not score as ``model`` does (the same bits on seeded rows,
        missing values among them): how a forest turns its leaves into a probability is
        scikit-learn's to change, and a version that changed it must stop the save."""
        import sklearn

        from puicl_model.estimator.learners import row_decision

        rng = np.random.default_rng(0)
        x = rng.normal(scale=2.0, size=(256, int(model.n_features_in_)))
        x[rng.random(x.shape) < 0.05] = np.nan
        if not np.array_equal(self.decision_function(x), row_decision(model, x)):
            raise ValueError(f"scikit-learn {sklearn.__version__} scores its random forests in "
                             "a way this puicl does not follow; the classifier cannot be saved")

    def problem(self, n_features: int) -> str | None:
        """What keeps these arrays (read from a saved folder) from being trees that a row of
        ``n_features`` walks down to a leaf (as :meth:`BoostedTrees.problem`), or from giving
        probabilities. None: nothing."""
        per_node = {"share": np.float64, "feature": np.int64, "threshold": np.float64,
                    "missing_go_to_left": np.uint8, "left": np.int64, "right": np.int64}
        problem = _arrays_problem(self, {}, per_node)
        if problem:
            return problem
        inner = self.left != -1
        problem = _layout_problem(self.starts, inner, self.left, self.right, self.feature,
                                  n_features)
        leaves = self.share[~inner]
        if problem is None and not ((leaves >= 0.0) & (leaves <= 1.0)).all():
            return "trees whose leaves hold no probability"
        return problem

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        """The log-odds of P(labeled | x) per row, as the fitted forest's probability gives
        them."""
        from puicl_model.estimator.learners import log_odds

        x = np.asarray(x, dtype=np.float64).astype(np.float32)
        total = np.zeros(len(x), dtype=np.float64)
        inner = self.left != -1
        for start in self.starts:
            total += self.share[_leaves(x, int(start), inner, self.feature, self.threshold,
                                        self.missing_go_to_left, self.left, self.right)]
        total /= len(self.starts)
        return log_odds(total)
