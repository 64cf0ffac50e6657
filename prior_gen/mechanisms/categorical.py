"""Categorical features: discretise some of a finished task's feature columns into levels.

Beyond the paper: TabPFN's prior turns some features into categories, and
real tables (MONK, Car) have them, while the paper's prior makes every feature continuous.
With ``prior.dataset.categorical`` set, each task, after its PU split:

1. draws its share s ~ U(share) and, for every column j, u_j < s (categorical or not) and a
   level count k_j ~ U{levels}; all of these are drawn for every column, used or not, so one
   column's outcome never shifts another's draws;
2. for each categorical column in column order: k_j − 1 distinct cut positions among the
   sorted positions 1..n−1 of the column's n values (uniform, without replacement: Floyd's
   algorithm), whose
   values are the thresholds; a row's level is the number of thresholds ≤ its value, then
   renumbered densely 0..m−1 (m = k_j unless values tie, m < k_j then; a constant column
   keeps m = 1);
3. with probability ``shuffle_levels`` the m codes are permuted at random, so that the code
   is not ordinal with the latent value (nominal data); otherwise they keep its order.

Why random cut positions rather than quantile bins: level sizes then vary from balanced to
very skewed (uniform spacings), as real categories do; quantile bins would make every level
equally frequent. Why codes 0..m−1 and not one-hot: the model standardizes every column with
the labeled rows' statistics, so any affine coding is the same to it, and the codes keep the
number of columns (the model reads at most ``max_features``).

Every draw comes from the task's own categorical stream, keyed by what is drawn: the task's
seed key with scope ``categorical`` (prior_gen.paper.seeding), independent of the task's main
stream, its redraws and the batch. The arithmetic is comparisons only (a sort, whose result
does not depend on the algorithm, then ``searchsorted``): the codes are the same on every CPU,
so ``arithmetic: portable`` stays portable.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from prior_gen.config import CategoricalConfig
from prior_gen.paper.seeding import task_stream
from prior_gen.task import Task

__all__ = ["cut_positions", "discretise_task"]


def cut_positions(n: int, count: int, rng: np.random.Generator) -> list[int]:
    """``count`` distinct positions of 1..n-1, uniformly (Floyd's algorithm: one uniform per
    position, drawn at once; the products are exact IEEE doubles, the same on every CPU)."""
    chosen: set[int] = set()
    for u, top in zip(rng.random(count).tolist(), range(n - count, n), strict=True):
        pick = 1 + int(u * top)  # uniform in 1..top
        chosen.add(top if pick in chosen else pick)
    return sorted(chosen)


def _levels(values: np.ndarray, n_levels: int, rng: np.random.Generator) -> np.ndarray:
    """Dense level codes 0..m-1 (int64) of one column, by ``n_levels - 1`` random cuts."""
    ordered = np.sort(values)
    thresholds = np.unique(ordered[cut_positions(values.shape[0], n_levels - 1, rng)])
    codes = np.searchsorted(thresholds, values, side="right")
    # each threshold is some row's value, so codes 1..len(thresholds) all occur; code 0 is
    # empty when the column's minimum is the first threshold (ties): shift to keep them dense
    if ordered[0] == thresholds[0]:
        codes -= 1
    return codes


def discretise_task(task: Task, spec: CategoricalConfig) -> Task:
    """``task`` with some feature columns replaced by level codes (see the module docstring);
    its metadata gains ``categorical_features`` (column indices) and ``categorical_levels``
    (m of each). The input task is not modified."""
    rng = task_stream(task.meta["seed_key"], "categorical")
    n_rows, n_features = task.x.shape
    lo, hi = spec.share
    share = lo + float(rng.random()) * (hi - lo)
    chosen = rng.random(n_features) < share
    span = spec.levels[1] - spec.levels[0] + 1
    counts = spec.levels[0] + np.minimum((rng.random(n_features) * span).astype(np.int64), span - 1)

    columns = [int(j) for j in np.flatnonzero(chosen)]
    # the chosen columns as contiguous rows: searchsorted is ~3x faster than on strided columns
    latent = np.ascontiguousarray(task.x[:, columns].T)
    codes = np.zeros(latent.shape, np.int64)
    realized: list[int] = []
    for row, j in enumerate(columns):
        n_levels = int(min(counts[j], n_rows))  # at most one level per row
        if n_levels >= 2:
            codes[row] = _levels(latent[row], n_levels, rng)
        m = int(codes[row].max()) + 1
        if float(rng.random()) < spec.shuffle_levels:
            codes[row] = rng.permutation(m)[codes[row]]
        realized.append(m)
    x = task.x.copy()
    x[:, columns] = codes.T.astype(np.float32)
    meta = {**task.meta, "categorical_features": columns, "categorical_levels": realized}
    return dataclasses.replace(task, x=x, meta=meta)
