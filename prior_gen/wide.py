"""Wider tables (``prior.dataset.wide``): some tasks draw their feature count from a wider range.

The paper's tasks have 5–20 features (§5); real tables are often wider, and the classifier
scores those through groups of at most ``model.max_features`` features. With this section each
task draws two uniforms from its own ``wide`` stream (``prior_gen.seeding.task_stream``), both
whatever the outcome: u₁ < ``probability`` makes the task wide, and u₂ picks its feature count
d from U{lo..hi} of ``wide.n_features``. The draw is per task: the shards store every task's
own sizes and the trainer pads a micro-batch to its widest task, computing on real cells only
(docs/training.md §10), so the tasks of one step may differ in width.

A wide task changes only the sizes in its plan (:func:`widen`):

* its feature count becomes d, and so does its cause count k where the features are the causes
  (non-causal, ``noncausal_features: causes``, §2.2 needs d = k);
* a causal task takes its label and d features from distinct hidden nodes (§2.2), of which its
  SCM has (L_g − 1)·h. Where they are too few, its width h becomes the least that holds them,
  ⌈(d + 1) / (L_g − 1)⌉. The width, rather than the depth or extra nodes, because it is the
  one size that every forward pass (native, portable, families) already reads from the plan:
  the activation drawn per block, the order of the draws from the task's stream and the node
  selection all stay as they are, and the arithmetic is that of any other width, so it is as
  portable as before. At the paper's depths (L_g ≥ 4: three blocks or more) 100 features need
  a width of at most 34, inside the paper's range of 12–36 (§5);
* a non-causal task reads its features through the readout head R_x, which takes any d, or
  from its causes: its SCM stays as drawn.

The task's main stream is not read here, so everything it draws is as it would be for a task of
that size; the draws here are integer arithmetic on uniforms, the same on every CPU.
Metadata ``wide`` says whether the task drew a wide count (``width`` is the width it ran with).
"""

from __future__ import annotations

import dataclasses

from prior_gen.factors import TaskPlan
from prior_gen.mechanisms_config import WideConfig
from prior_gen.seeding import task_stream

__all__ = ["causal_width", "widen"]


def causal_width(width: int, depth: int, n_features: int) -> int:
    """The least width ≥ ``width`` whose ``depth − 1`` hidden blocks hold ``n_features + 1``
    distinct nodes (the label and the features of a causal SCM)."""
    blocks = depth - 1
    return max(width, -(-(n_features + 1) // blocks))


def widen(plan: TaskPlan, spec: WideConfig) -> TaskPlan:
    """``plan`` as the module docstring says: wide with probability ``spec.probability``,
    else unchanged but for its ``wide`` flag."""
    u_wide, u_count = task_stream(plan.seed_key, "wide").random(2).tolist()
    if not u_wide < spec.probability:
        return dataclasses.replace(plan, wide=False)
    lo, hi = spec.n_features
    d = lo + min(int(u_count * (hi - lo + 1)), hi - lo)
    uses_causes = not plan.causal and plan.noncausal_features == "causes"
    return dataclasses.replace(
        plan,
        n_features=d,
        n_causes=d if uses_causes else plan.n_causes,
        width=causal_width(plan.width, plan.depth, d) if plan.causal else plan.width,
        wide=True,
    )
