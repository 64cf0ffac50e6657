"""Labels from a boolean rule over a few discretised features (``prior.label_rule``).

The paper labels a task by the rank of one SCM node's value (§2.2): the positive class is a
smooth region of the features. Real tables also hold classes that are rules over categories,
the MONK problems being the textbook case (Thrun et al., 1991: "a1 = a2 or a5 = 1"); the
benchmark's MONK-1/2 are where the model trails its baselines most (docs/decisions.md,
"Categorical features in the prior"). With probability ``probability`` per task (the task's ``rule``
stream, ``prior_gen.seeding.task_stream``), the positive class is instead

    R(x) = C(x) ∧ (x_c ≥ t)   if C holds on at least q rows,   else   C(x) ∨ (x_c ≥ t),

where q = n − ⌈π·n⌉ is the number of positives the score's rank would give (so η, π and the
PU split work unchanged), and

* C is a left-to-right and/or combination (each operator ½–½) of literals over r ~ U{features}
  distinct feature columns, each cut into m ~ U{levels} levels at random cut positions of its
  sorted values (as ``prior_gen.categorical``): per column "level = v" or "level ≠ v" (v one of
  its levels), and with probability ½, when r ≥ 2, the first two columns' literals are one
  "level_a = level_b" (MONK-1's a1 = a2);
* the closing threshold t on a uniform column c is the value that makes R hold on exactly q
  rows; where x_c ties at t, R holds on a few more (``realized_pi`` records it), and where C
  already holds on exactly q rows the threshold is left out.

The rule reads the standardized, clipped features, so it is a function of the stored x; it is
recorded in the task's metadata (``label_rule``), and :func:`evaluate_rule` recomputes the
labels from it (tested: they equal y). Comparisons and a sort only: the same on every CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from prior_gen.categorical import cut_positions
from prior_gen.factors import TaskPlan, n_negatives
from prior_gen.families.base import uniform_integers
from prior_gen.mechanisms_config import LabelRuleConfig
from prior_gen.seeding import task_stream

__all__ = ["draw_rule", "evaluate_rule", "rule_labeler"]


def _thresholds(values: np.ndarray, n_levels: int, rng: np.random.Generator) -> list[float]:
    """Distinct cut values of one column: ``n_levels - 1`` random positions of its sorted
    values (fewer where values tie); level = number of cuts ≤ the value."""
    n_levels = min(n_levels, values.shape[0])
    if n_levels < 2:
        return []
    ordered = np.sort(values)
    cuts = ordered[cut_positions(values.shape[0], n_levels - 1, rng)]
    return [float(v) for v in np.unique(cuts)]


def _levels(x: np.ndarray, column: int, thresholds: list[float]) -> np.ndarray:
    return np.searchsorted(np.asarray(thresholds, np.float32), x[:, column], side="right")


def _literal(x: np.ndarray, rule: dict[str, Any], literal: list) -> np.ndarray:
    kind, a, b = literal
    columns, thresholds = rule["columns"], rule["thresholds"]
    level_a = _levels(x, columns[a], thresholds[a])
    if kind == "same":
        return level_a == _levels(x, columns[b], thresholds[b])
    return (level_a == b) if kind == "eq" else (level_a != b)


def _core(x: np.ndarray, rule: dict[str, Any]) -> np.ndarray:
    """C(x): the literals combined left to right by the rule's operators."""
    holds = _literal(x, rule, rule["literals"][0])
    for op, literal in zip(rule["ops"], rule["literals"][1:], strict=True):
        other = _literal(x, rule, literal)
        holds = (holds & other) if op == "and" else (holds | other)
    return holds


def evaluate_rule(rule: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """int8 labels (1 where the rule holds) of the rows of ``x`` [n, d] for a recorded rule
    (``Task.meta["label_rule"]``)."""
    holds = _core(x, rule)
    if rule["closing"] is not None:
        op, column, threshold = rule["closing"]
        above = x[:, column] >= np.float32(threshold)
        holds = (holds & above) if op == "and" else (holds | above)
    return holds.astype(np.int8)


def _closing(x: np.ndarray, core: np.ndarray, target: int, column: int) -> list | None:
    """The threshold atom that brings the rule to ``target`` rows (see the module docstring)."""
    held = int(np.count_nonzero(core))
    if held == target:
        return None
    op, eligible, wanted = ("and", core, target) if held > target else ("or", ~core, target - held)
    values = np.sort(x[eligible, column])  # ascending; the wanted-th largest is the threshold
    return [op, column, float(values[values.shape[0] - wanted])]


def draw_rule(x: np.ndarray, target: int, spec: LabelRuleConfig, rng: np.random.Generator):
    """A rule over ``x`` [n, d] holding on ``target`` rows (more only at ties), as recorded in
    the metadata: columns, their thresholds, literals, operators and the closing atom."""
    d = x.shape[1]
    r = min(int(uniform_integers(rng, spec.features, 1)[0]), d)
    columns = np.argsort(rng.random(d), kind="stable")[:r]
    sizes = uniform_integers(rng, spec.levels, r)
    thresholds = [_thresholds(x[:, j], int(m), rng) for j, m in zip(columns, sizes, strict=True)]
    literals: list[list] = []
    kinds, values = rng.random(r), rng.random(r)
    for i in range(r):  # level v uniform among the column's levels 0..len(thresholds)
        level = int(values[i] * (len(thresholds[i]) + 1))
        literals.append(["eq" if kinds[i] < 0.5 else "ne", i, level])
    if r >= 2 and rng.random() < 0.5:
        literals[:2] = [["same", 0, 1]]
    ops = ["and" if u < 0.5 else "or" for u in rng.random(len(literals) - 1)]
    rule = {"columns": [int(j) for j in columns], "thresholds": thresholds,
            "literals": literals, "ops": ops, "closing": None}  # fmt: skip
    closing_column = int(uniform_integers(rng, (0, d - 1), 1)[0])
    rule["closing"] = _closing(x, _core(x, rule), target, closing_column)
    return rule


def rule_labeler(
    plan: TaskPlan, spec: LabelRuleConfig
) -> Callable[[np.ndarray], tuple[np.ndarray, dict[str, Any]]] | None:
    """The labeler of ``prior_gen.pu.build_task`` for a rule task, None for a score task.

    Every call starts the task's rule stream afresh, so a redrawn SCM gets a rule drawn in the
    same way from its own features."""
    if not float(task_stream(plan.seed_key, "rule").random()) < spec.probability:
        return None

    def label(x: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        rng = task_stream(plan.seed_key, "rule")
        rng.random()  # the draw that made this a rule task
        target = x.shape[0] - n_negatives(x.shape[0], plan.pi)
        rule = draw_rule(x, target, spec, rng)
        return evaluate_rule(rule, x), {"label_mechanism": "rule", "label_rule": rule}

    return label
