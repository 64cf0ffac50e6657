"""Columns as real tables have them: per-task post-processing of the feature matrix
(``prior.dataset.columns``).

An SCM's features are continuous, roughly symmetric and all distinct; real tables repeat
columns (the same quantity in two units, a total next to its parts), store integers and
counts, have skewed and heavy-tailed marginals, columns with a handful of values, and columns
unrelated to the label; TabICLv2 builds its prior for such diversity (arXiv 2602.11139, §5). After a
task's PU split (before ``prior.dataset.categorical``), from the task's ``columns`` stream:

1. for every mechanism (``COLUMN_MECHANISMS`` order) a uniform u_m (used iff u_m < p_m) and a
   column count c_m ~ U{1..max_columns}, all drawn whatever is used, so one mechanism's outcome
   never shifts another's draws;
2. each used mechanism, in that order, picks min(c_m, d) distinct target columns (uniform) and
   changes them in place, reading the matrix as the previous mechanisms left it:

   * ``skewed``: ±E(s·x), s ~ U(0.5, 1.5): log-normal-like, right or left skewed;
   * ``heavy_tailed``: x·E(h·x²/2), h ~ U(0.1, 0.5): Tukey's h transform, heavy tails;
   * ``integer``: round(a·x), a ~ U(0.5, 10): integers (ages, years, scores);
   * ``count``: floor(λ·E(s·x)), λ ~ U(0.5, 5), s ~ U(0.3, 1): non-negative skewed counts;
   * ``low_cardinality``: 2–6 levels at random cut positions (as ``prior_gen.categorical``)
     mapped to increasing numeric values (cumulative steps U(0.2, 1)): ratings, room counts;
   * ``noise``: N(0, 1) draws (the quantile table), independent of everything: irrelevant;
   * ``duplicate``: an exact copy of another column;
   * ``near_duplicate``: another column + N(0, σ²), σ ~ U(0.01, 0.1);
   * ``scaled_copy``: a·x_s + b, |a| ~ U(0.1, 10) with a random sign, b ~ U(−10, 10): the same
     quantity in other units;
   * ``sum``: ±x_s1 ± x_s2 of two other columns (a total next to its parts).

   Copies read source columns other than their target (none where d = 1: skipped).

E(y) = (1 + y/64)^64, six squarings in float64 with y clamped to [−64, 60], stands in for
exp(y) (relative error < y²/128 for moderate y): exp's last bits differ between numpy's SIMD
kernels, E's do not, since it is + × only. Every operation here is IEEE-exact (+ − × ÷, floor,
rint, comparisons, a sort): the columns are the same on every CPU. The label, the rows and
the other columns are unchanged; metadata ``column_mechanisms`` lists what was applied.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from prior_gen.categorical import cut_positions
from prior_gen.families.base import normals, uniform_integers
from prior_gen.mechanisms_config import COLUMN_MECHANISMS, ColumnsConfig
from prior_gen.seeding import task_stream
from prior_gen.task import Task

__all__ = ["pseudo_exp", "transform_columns"]


def pseudo_exp(y: np.ndarray) -> np.ndarray:
    """float64 (1 + y/64)^64 ≈ exp(y) for y clamped to [−64, 60], by six squarings."""
    value = np.clip(np.asarray(y, np.float64), -64.0, 60.0) / 64.0 + 1.0
    for _ in range(6):
        value = value * value
    return value


def _uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return lo + float(rng.random()) * (hi - lo)


def _others(rng: np.random.Generator, d: int, target: int, count: int) -> list[int]:
    """``count`` distinct columns other than ``target`` (uniform)."""
    order = [j for j in np.argsort(rng.random(d), kind="stable").tolist() if j != target]
    return order[:count]


def _low_cardinality(column: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n_levels = min(int(uniform_integers(rng, (2, 6), 1)[0]), column.shape[0])
    ordered = np.sort(column)
    cuts = np.unique(ordered[cut_positions(column.shape[0], n_levels - 1, rng)])
    steps = 0.2 + 0.8 * rng.random(n_levels)
    values = np.cumsum(steps)  # increasing: the levels keep the latent's order
    return values[np.searchsorted(cuts, column, side="right")]


def _apply(name: str, x: np.ndarray, target: int, rng: np.random.Generator) -> dict[str, Any]:
    """Change column ``target`` of ``x`` by mechanism ``name``; return what to record."""
    column = x[:, target].astype(np.float64)
    n, d = x.shape
    record: dict[str, Any] = {"mechanism": name, "column": target}
    if name == "skewed":
        sign = 1.0 if rng.random() < 0.5 else -1.0
        new = sign * pseudo_exp(_uniform(rng, 0.5, 1.5) * column)
    elif name == "heavy_tailed":
        new = column * pseudo_exp(_uniform(rng, 0.1, 0.5) * column * column * 0.5)
    elif name == "integer":
        new = np.rint(_uniform(rng, 0.5, 10.0) * column)
    elif name == "count":
        scale, slope = _uniform(rng, 0.5, 5.0), _uniform(rng, 0.3, 1.0)
        new = np.floor(scale * pseudo_exp(slope * column))
    elif name == "low_cardinality":
        new = _low_cardinality(column, rng)
    elif name == "noise":
        new = normals(rng, n).astype(np.float64)
    else:
        sources = _others(rng, d, target, 2 if name == "sum" else 1)
        if not sources:
            return {}
        record["sources"] = sources
        source = x[:, sources[0]].astype(np.float64)
        if name == "duplicate":
            new = source
        elif name == "near_duplicate":
            new = source + normals(rng, n, _uniform(rng, 0.01, 0.1)).astype(np.float64)
        elif name == "scaled_copy":
            sign = 1.0 if rng.random() < 0.5 else -1.0
            new = sign * _uniform(rng, 0.1, 10.0) * source + _uniform(rng, -10.0, 10.0)
        else:  # sum
            if len(sources) < 2:
                return {}
            signs = np.where(rng.random(2) < 0.5, 1.0, -1.0)
            new = signs[0] * source + signs[1] * x[:, sources[1]].astype(np.float64)
    x[:, target] = new.astype(np.float32)
    return record


def transform_columns(task: Task, spec: ColumnsConfig) -> Task:
    """``task`` with its columns changed as the module docstring says; metadata gains
    ``column_mechanisms`` (what was applied, in order). The input task is not modified."""
    rng = task_stream(task.meta["seed_key"], "columns")
    d = task.x.shape[1]
    used = rng.random(len(COLUMN_MECHANISMS)) < np.array(spec.probabilities())
    counts = uniform_integers(rng, (1, spec.max_columns), len(COLUMN_MECHANISMS))
    x = task.x.copy()
    applied: list[dict[str, Any]] = []
    for name, on, count in zip(COLUMN_MECHANISMS, used, counts.tolist(), strict=True):
        if not on:
            continue
        targets = np.argsort(rng.random(d), kind="stable")[: min(count, d)]
        for target in targets.tolist():
            record = _apply(name, x, target, rng)
            if record:
                applied.append(record)
    meta = {**task.meta, "column_mechanisms": applied}
    return dataclasses.replace(task, x=x, meta=meta)
