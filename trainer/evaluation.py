"""Validation metrics of one PU task and their aggregation over a validation set.

Per task, on its unlabeled rows only (the rows whose hidden labels the model predicts):

* loss     -- mean cross-entropy of the two logits against the hidden labels
* AUC      -- Mann-Whitney U / (n_pos * n_neg) of P(positive), ties counting 1/2 (midranks);
              undefined (NaN) when the pool holds a single class
* accuracy -- share of rows whose arg-max class (P(positive) > 1/2) is the hidden label
* π        -- realized negative share of the pool, used to bucket the AUC

Aggregates are means over tasks (each task weighs the same, as in training); the AUC means
skip tasks where it is undefined, and say how many they used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def auc_with_ties(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC of ``scores`` for ``labels`` (1 = positive), ties counted as 1/2.

    Computed from midranks (Mann-Whitney); NaN if either class is absent.
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    # midrank of each run of equal scores: ranks are 1-based
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], sorted_scores.size]
    midranks_sorted = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    ranks = np.empty_like(midranks_sorted)
    ranks[order] = midranks_sorted
    rank_sum = ranks[labels].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass(frozen=True)
class TaskScores:
    """Validation figures of one task (unlabeled rows only)."""

    loss: float
    auc: float  # NaN when the pool has one class only
    accuracy: float
    pi: float  # realized negative share of the unlabeled pool
    stage: str  # "1", "50", "tail", ...


def score_task(logits: np.ndarray, labels: np.ndarray, stage: str) -> TaskScores:
    """Figures of one task from its unlabeled rows' logits ``[n, 2]`` (negative, positive)."""
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if logits.ndim != 2 or logits.shape[1] != 2 or logits.shape[0] != labels.shape[0]:
        raise ValueError(
            f"expected logits [n, 2] and labels [n], got {logits.shape} and {labels.shape}"
        )
    top = logits.max(axis=1, keepdims=True)
    log_norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    loss = float(np.mean(log_norm - logits[np.arange(labels.size), labels]))
    # P(positive) is monotone in the logit difference, which is exact where softmax saturates
    margin = logits[:, 1] - logits[:, 0]
    accuracy = float(np.mean((margin > 0) == (labels == 1)))
    pi = float(np.mean(labels == 0))
    return TaskScores(loss, auc_with_ties(margin, labels), accuracy, pi, stage)


def bucket_name(low: float, high: float) -> str:
    return f"{low:g}-{high:g}"


def summarize(tasks: Sequence[TaskScores], pi_edges: Sequence[float]) -> dict[str, object]:
    """Means over tasks: loss, AUC, accuracy, and AUC per π bucket and per stage."""
    if not tasks:
        raise ValueError("no validation tasks to summarize")
    aucs = np.array([t.auc for t in tasks])
    defined = ~np.isnan(aucs)
    summary: dict[str, object] = {
        "loss": float(np.mean([t.loss for t in tasks])),
        "accuracy": float(np.mean([t.accuracy for t in tasks])),
        "auc": float(aucs[defined].mean()) if defined.any() else math.nan,
        "tasks": len(tasks),
        "tasks_with_auc": int(defined.sum()),
    }
    pis = np.array([t.pi for t in tasks])
    per_bucket: dict[str, float | None] = {}
    for i, (low, high) in enumerate(itertools.pairwise(pi_edges)):
        last = i == len(pi_edges) - 2
        inside = (pis >= low) & ((pis <= high) if last else (pis < high))
        chosen = inside & defined
        per_bucket[bucket_name(low, high)] = float(aucs[chosen].mean()) if chosen.any() else None
    summary["auc_by_pi"] = per_bucket
    per_stage: dict[str, float | None] = {}
    for stage in dict.fromkeys(t.stage for t in tasks):
        chosen = np.array([t.stage == stage for t in tasks]) & defined
        per_stage[stage] = float(aucs[chosen].mean()) if chosen.any() else None
    summary["auc_by_stage"] = per_stage
    return summary
