"""From SCM output to a PU task (paper §2.2–2.3, as :mod:`prior_gen.paper.reference` states
it): standardize, rank-threshold labels, split, metadata, fast.

The statistics run over all n generated rows, but only the kept rows are transformed; the sums
are BLAS's (``native``: the original bytes) or row by row (``portable``: the same bytes on every
CPU); the label threshold's ties go to numpy's partition (``native``) or to the lowest rows
(``portable``, the reference's rule). The split is the reference's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from prior_gen.paper.factors import TaskPlan, n_negatives
from prior_gen.paper.reference import STD_FLOOR, RawTask, pu_split
from prior_gen.task import Task

__all__ = ["NonFiniteOutput", "build_task", "plan_meta", "rank_labels", "rank_labels_by_index"]


class NonFiniteOutput(ArithmeticError):
    """The SCM overflowed float32 (e.g. a chain of square activations); redraw the task."""


def _ones(n: int) -> np.ndarray:
    """A float64 vector of n ones (a read-only slice of a cached one: no allocation)."""
    global _ONES
    if _ONES.shape[0] < n:
        _ONES = np.ones(max(n, 2 * _ONES.shape[0]))
        _ONES.flags.writeable = False
    return _ONES[:n]


_ONES = np.ones(0)


def _centered_stats(values: np.ndarray, portable: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values − mean in float64, std floored at 1e-6) of float32 ``values`` [n, d], by
    column; raises NonFiniteOutput when the SCM overflowed. ``portable``: the sums run row by
    row (prior_gen.engine.portable) instead of in BLAS's CPU-dependent order."""
    n = values.shape[0]
    centered = values.astype(np.float64)
    if portable:
        from prior_gen.engine.portable import column_means

        centered -= column_means(centered)
        std = np.sqrt(column_means(np.multiply(centered, centered)))
    else:
        ones = _ones(n)
        centered -= ones @ centered / n
        std = np.sqrt(ones @ np.multiply(centered, centered) / n)
    # a non-finite mean makes the std non-finite too, so one test covers both
    if not np.isfinite(std).all():
        raise NonFiniteOutput("SCM output is not finite")
    return centered, np.maximum(std, STD_FLOOR, out=std)


def _scaled(centered: np.ndarray, std: np.ndarray, clip: float) -> np.ndarray:
    """float32 of centered / std, clipped to ±clip."""
    out = np.divide(centered, std)
    np.clip(out, -clip, clip, out=out)
    return out.astype(np.float32)


def rank_labels(score: np.ndarray, pi: float) -> np.ndarray:
    """int8 labels: 0 for the ⌈π·n⌉ highest scores, 1 otherwise (exact ties at the threshold
    are split in an unspecified but deterministic way)."""
    n = score.shape[0]
    labels = np.ones(n, np.int8)
    n_neg = n_negatives(n, pi)
    if n_neg > 0:
        labels[np.argpartition(score, n - n_neg)[n - n_neg :]] = 0
    return labels


def rank_labels_by_index(score: np.ndarray, pi: float) -> np.ndarray:
    """:func:`rank_labels` with its ties specified as the reference's ranking: of the scores
    equal to the threshold, the ones at the lowest rows are negatives (a partition, not the
    reference's sort: the same labels, faster)."""
    n = score.shape[0]
    labels = np.ones(n, np.int8)
    n_neg = n_negatives(n, pi)
    if n_neg > 0:
        threshold = np.partition(score, n - n_neg)[n - n_neg]  # the value is unique
        above = score > threshold
        labels[above] = 0
        ties = np.flatnonzero(score == threshold)
        labels[ties[: n_neg - int(np.count_nonzero(above))]] = 0
    return labels


def build_task(plan: TaskPlan, raw: RawTask, clip: float, attempts: int, arithmetic: str) -> Task:
    """Standardize, label and PU-split one task's SCM output (uses the task's stream).
    ``arithmetic``: ``prior.scm.arithmetic`` (``portable``: fixed-order sums, specified ties)."""
    portable = arithmetic == "portable"
    # statistics over all n generated rows (§2.2); only the kept rows are transformed
    x_centered, x_std = _centered_stats(raw.x, portable)
    score_centered, score_std = _centered_stats(raw.score[:, None], portable)
    # the portable ranking specifies ties (the lowest rows first); numpy's partition alone,
    # kept for the native path's bytes, leaves their order to its SIMD kernel
    ranker = rank_labels_by_index if portable else rank_labels
    labels = ranker(_scaled(score_centered, score_std, clip)[:, 0], plan.pi)
    n_labeled = plan.n_labeled
    labeled, unlabeled = pu_split(labels, plan)
    rows = np.concatenate([labeled, unlabeled])

    y = labels[rows]
    n_unlabeled = unlabeled.shape[0]
    unlabeled_negatives = int(n_unlabeled - np.count_nonzero(y[n_labeled:]))
    meta = plan_meta(plan, int(rows.shape[0]), n_unlabeled, unlabeled_negatives, attempts)
    if plan.causal:
        meta["label_node"] = raw.label_node
    x = _scaled(x_centered[rows], x_std, clip)
    return Task(x=x, y=y, n_labeled=n_labeled, meta=meta)


def plan_meta(plan: TaskPlan, n_rows: int, n_unlabeled: int, unlabeled_negatives: int,
              attempts: int) -> dict[str, Any]:
    """A task's metadata from its plan and its realized sizes (the keys in their stored order;
    a causal task's ``label_node`` comes from its SCM and is added by the caller)."""
    meta: dict[str, Any] = {
        "stage": plan.stage,
        "index": plan.index,
        "step": plan.step,
        "seed_key": list(plan.seed_key),
        "n_rows": n_rows,
        "n_features": plan.n_features,
        "n_labeled": plan.n_labeled,
        "n_unlabeled": n_unlabeled,
        "n_generated": plan.n_rows,
        "pi": plan.pi,
        "eta": plan.eta,
        "realized_pi": unlabeled_negatives / n_unlabeled,
        "realized_eta": n_unlabeled / plan.n_labeled,
        "causal": plan.causal,
        "depth": plan.depth,
        "width": plan.width,
        "n_causes": plan.n_causes,
        "noise_std": plan.noise_std,
        "cause_dist": plan.cause_dist,
        "activation_schedule": plan.activation_schedule,
        "activations": list(plan.activations),
        "attempts": attempts,
    }
    if plan.causal:
        meta.update(
            label_block=plan.label_block,
            feature_selection=plan.feature_selection,
            feature_order=plan.feature_order,
        )
    else:
        meta["noncausal_features"] = plan.noncausal_features
    return meta
