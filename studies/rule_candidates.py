"""Candidate portfolio rules, replayed side by side on the kept scores of
``studies/portfolio_rule.py collect``, judged per task against the model alone and the per-task
best baseline.

A rule reads what the classifier has when it chooses (each member's held-out and pool scores,
the number of labeled positives, the model's π̂ from its own folds) and returns the blend's
weights. Every rule is judged on the same scores, so the differences between rules carry no
seed noise of their own; the seed noise of a difference is its spread over repetitions (where a
cell was collected at several) and over tables.

Usage (docs/decisions.md, "A portfolio chosen per table")::

    python -m studies.portfolio_rule collect --out results/portfolio --jobs 2 --bags 30 \\
        --fewer-bags 10 --cells 600:0.2 --repeats 12
    python -m studies.portfolio_rule collect --out results/portfolio --jobs 2 --bags 30 \\
        --fewer-bags 10 --cells 600:0.5,all:0.2,all:0.5,all:c0.05,all:c0.2
    python -m studies.rule_candidates --kept results/portfolio \\
        --grid docs/benchmark/size_grid/grid.csv --grid results/yard/default/grid.csv \\
        --out results/portfolio/rules.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from puicl_model.estimator.learners import BAGGED, LOGISTIC
from puicl_model.estimator.portfolio import (
    EVIDENCE_Z,
    FALLBACK_WEIGHTS,
    JUDGED_POOL_ROWS,
    MIN_LABELED_FOR_HOLD_OUT,
    MODEL,
    Blend,
    Evidence,
    candidates,
    held_out_aucs,
)
from puicl_model.estimator.prior import class_prior_estimate
from studies.portfolio_rule import REPETITION_MARK, cell_name

BEHIND_BY = 0.02
# the tree member of a task where no portfolio ran (too few labeled positives or pool rows)
ANY_TREES = "any"
# the model alone's lead over the per-task best baseline (mean over a table's repetitions) that
# makes a table one where the model is clearly strong
LEADS_BY = 0.02
Weights = Mapping[str, float]


@dataclass(frozen=True)
class Task:
    """What a rule reads on one kept task, for one choice of the tree member."""

    members: tuple[str, ...]  # (model, logistic, the tree member)
    evidence: Evidence
    n_labeled: int
    pi_hat: float  # the model's π̂ on its own folds (the negative share of the pool)

    def pick(self, blends: Mapping[str, Weights], fallback: str, z: float) -> Weights:
        """The blend of highest held-out AUC where it leads ``fallback`` by more than ``z``
        standard errors, else ``fallback`` (the shipped rule's test, over ``blends``)."""
        aucs, se = held_out_aucs(self.evidence, self.members, fallback, blends)
        best = max(aucs, key=lambda name: aucs[name])
        lead = aucs[best] - aucs[fallback]
        return blends[best] if best != fallback and lead > z * se[best] else blends[fallback]


Rule = Callable[[Task], Weights]


def _named(members: Sequence[str]) -> dict[str, Weights]:
    return {name: {m if m in (MODEL, LOGISTIC) else members[2]: w
                   for m, w in weights.items()}
            for name, weights in candidates((MODEL, LOGISTIC, BAGGED)).items()}


def _model_weighted(model_weight: float, members: Sequence[str]) -> Weights:
    """The three ``members`` (model, logistic, tree) with the model weighed ``model_weight``
    and the learners the rest in halves."""
    rest = (1.0 - model_weight) / 2
    return {MODEL: model_weight, LOGISTIC: rest, members[2]: rest}


def previous(task: Task) -> Weights:
    """The rule before the model-weighted fallback: the three in thirds (small tables) or the
    logistic learner (large ones) stand unless another even blend leads by 3 SE."""
    blends = _named(task.members)
    fallback = ("model+logistic+bagged" if task.n_labeled < MIN_LABELED_FOR_HOLD_OUT
                else "logistic")
    return task.pick(blends, fallback, EVIDENCE_Z)


def small_tables(rule: Rule) -> Rule:
    """``rule`` on tables below the hold-out threshold; the previous rule (the logistic
    learner's fallback, as shipped) on larger ones."""
    def gated(task: Task) -> Weights:
        return previous(task) if task.n_labeled >= MIN_LABELED_FOR_HOLD_OUT else rule(task)
    return gated


def model_weighted_fallback(model_weight: float, z: float = EVIDENCE_Z) -> Rule:
    """Small tables: the fallback weighs the model ``model_weight`` and the learners the rest
    in halves, left for another blend that leads it by ``z`` SE; large tables as before
    (0.6 at 3 SE: the shipped rule, ``portfolio.FALLBACK_WEIGHTS``)."""
    def rule(task: Task) -> Weights:
        blends = {**_named(task.members),
                  "fallback": _model_weighted(model_weight, task.members)}
        return task.pick(blends, "fallback", z)
    return small_tables(rule)


def leader_weighted_fallback(lead_weight: float, model_only: bool) -> Rule:
    """Small tables: the fallback weighs the member of highest held-out AUC ``lead_weight``
    and the others the rest in halves (``model_only``: only where that member is the model,
    else the three in thirds); large tables as before."""
    def rule(task: Task) -> Weights:
        blends = _named(task.members)
        aucs, _ = held_out_aucs(task.evidence, task.members, "model+logistic+bagged", blends)
        named = dict(zip(task.members, (MODEL, LOGISTIC, BAGGED), strict=True))
        leader = max(task.members, key=lambda member: aucs[named[member]])
        if model_only and leader != MODEL:
            return task.pick(blends, "model+logistic+bagged", EVIDENCE_Z)
        rest = (1.0 - lead_weight) / 2
        blends["fallback"] = {member: lead_weight if member == leader else rest
                              for member in task.members}
        return task.pick(blends, "fallback", EVIDENCE_Z)
    return small_tables(rule)


def composition_fallback(slope: float) -> Rule:
    """Small tables: the learners' joint weight in the fallback follows the model's π̂ (the
    negative share: a pool of mostly positives leaves a labeled-against-unlabeled learner
    little to learn), ``min(2/3, slope · π̂)``; large tables as before."""
    def rule(task: Task) -> Weights:
        learners = min(2.0 / 3.0, slope * max(task.pi_hat, 0.0))
        blends = {**_named(task.members),
                  "fallback": _model_weighted(1.0 - learners, task.members)}
        return task.pick(blends, "fallback", EVIDENCE_Z)
    return small_tables(rule)


def model_bar(z_model: float) -> Rule:
    """As before, except that on small tables the model alone replaces the fallback where its
    held-out AUC leads it by more than ``z_model`` SE (a lower bar for the member trained for
    PU pools)."""
    def rule(task: Task) -> Weights:
        blends = _named(task.members)
        fallback = "model+logistic+bagged"
        aucs, se = held_out_aucs(task.evidence, task.members, fallback, blends)
        if aucs[MODEL] - aucs[fallback] > z_model * se[MODEL]:
            return blends[MODEL]
        return task.pick(blends, fallback, EVIDENCE_Z)
    return small_tables(rule)


def large_fallback(model_weight: float | None) -> Rule:
    """The shipped rule on small tables; on large ones the fallback the three members with
    the model weighed ``model_weight`` (None: the three in thirds), standing unless another
    blend leads it by 3 SE."""
    small = model_weighted_fallback(FALLBACK_WEIGHTS[MODEL])

    def rule(task: Task) -> Weights:
        if task.n_labeled < MIN_LABELED_FOR_HOLD_OUT:
            return small(task)
        blends = _named(task.members)
        if model_weight is None:
            return task.pick(blends, "model+logistic+bagged", EVIDENCE_Z)
        blends["fallback"] = _model_weighted(model_weight, task.members)
        return task.pick(blends, "fallback", EVIDENCE_Z)
    return rule


def _sampled(parts: Sequence[Mapping[str, np.ndarray]], size: int,
             ) -> list[Mapping[str, np.ndarray]]:
    """Each part's scores at a sample of ``size`` rows, seeded by the parts' length (the
    same rows in every part and member); the parts as they are where they hold no more."""
    n = len(next(iter(parts[0].values())))
    if n <= size:
        return list(parts)
    rows = np.sort(np.random.default_rng(n).permutation(n)[:size])
    return [{member: scores[rows] for member, scores in part.items()} for part in parts]


def on_judged_rows(rule: Rule, rows: int = JUDGED_POOL_ROWS) -> Rule:
    """``rule`` reading small tables' folds against a seeded sample of ``rows`` pool rows (as
    the classifier judges a pool larger than that), not against every pool row."""
    def judged(task: Task) -> Weights:
        if task.n_labeled >= MIN_LABELED_FOR_HOLD_OUT:
            return rule(task)
        evidence = Evidence(task.evidence.held, _sampled(task.evidence.pool, rows))
        return rule(dataclasses.replace(task, evidence=evidence))
    return judged


def fallback_unless_thirds_lead(k: float) -> Rule:
    """Small tables: the model-weighted fallback (0.6), except where the three in thirds lead
    the model alone by more than ``k`` standard errors of their paired held-out difference:
    there the thirds stand in its place; then as the shipped rule. Large tables as before."""
    shipped = model_weighted_fallback(FALLBACK_WEIGHTS[MODEL])

    def rule(task: Task) -> Weights:
        blends = _named(task.members)
        aucs, se = held_out_aucs(task.evidence, task.members, MODEL, blends)
        thirds = "model+logistic+bagged"
        if aucs[thirds] - aucs[MODEL] > k * se[thirds]:
            return task.pick(blends, thirds, EVIDENCE_Z)
        return shipped(task)
    return small_tables(rule)


def on_less_evidence(rule: Rule, held: int, judged: int) -> Rule:
    """``rule`` reading what a classifier with at most ``held`` held-out positives and
    ``judged`` judged pool rows reads: on large tables a seeded sample of that many of the
    kept held-out positives; on every table a seeded sample of ``judged`` pool rows where the
    pool is larger (small tables' folds keep all their positives)."""
    def fewer(task: Task) -> Weights:
        helds = task.evidence.held
        if task.n_labeled >= MIN_LABELED_FOR_HOLD_OUT:
            helds = _sampled(helds, held)
        evidence = Evidence(helds, _sampled(task.evidence.pool, judged))
        return rule(dataclasses.replace(task, evidence=evidence))
    return fewer


def model_alone(task: Task) -> Weights:
    return {MODEL: 1.0}


def large_fallback_where_model_leads(z: float) -> Rule:
    """The shipped rule on small tables (the model-weighted blend, no evidence read); on large
    ones the fallback the model-weighted blend where the model's held-out AUC leads the
    logistic learner's by more than ``z`` SE of their paired difference (else the logistic
    learner, as shipped), standing unless another blend leads it by 3 SE: the model's pass
    over the pool paid only where the evidence favours the model."""
    model_weighted = large_fallback(FALLBACK_WEIGHTS[MODEL])

    def rule(task: Task) -> Weights:
        if task.n_labeled < MIN_LABELED_FOR_HOLD_OUT:
            return _model_weighted(FALLBACK_WEIGHTS[MODEL], task.members)
        if model_leads_logistic(task, z):
            return model_weighted(task)
        return task.pick(_named(task.members), LOGISTIC, EVIDENCE_Z)
    return rule


def model_leads_logistic(task: Task, z: float) -> bool:
    """Whether the model's held-out AUC leads the logistic learner's by more than ``z``
    standard errors of their paired difference: what a fit knows before any tree is fitted."""
    blends: dict[str, Weights] = {MODEL: {MODEL: 1.0}, LOGISTIC: {LOGISTIC: 1.0}}
    aucs, se = held_out_aucs(task.evidence, (MODEL, LOGISTIC), LOGISTIC, blends)
    return aucs[MODEL] - aucs[LOGISTIC] > z * se[MODEL]


def cascade(z: float) -> Rule:
    """Trees only where they can change the result: on small tables the model alone, with no
    tree fitted, where its held-out AUC leads the logistic learner's by more than ``z`` SE;
    elsewhere the shipped rule (the model-weighted fallback). Large tables as before."""
    shipped = model_weighted_fallback(FALLBACK_WEIGHTS[MODEL])

    def rule(task: Task) -> Weights:
        if task.n_labeled < MIN_LABELED_FOR_HOLD_OUT and model_leads_logistic(task, z):
            return {MODEL: 1.0}
        return shipped(task)
    return rule


def evidence_weights(beta: float) -> Rule:
    """Weights that follow the strength of the evidence: on small tables the fallback's weight
    of each learner times ``exp(beta · z)``, with ``z`` its held-out lead over the model alone
    in SE of their paired difference (the model's own z is 0), normalized; that blend stands
    unless an even blend leads it by 3 SE. Large tables as before."""
    def rule(task: Task) -> Weights:
        fallback = _model_weighted(FALLBACK_WEIGHTS[MODEL], task.members)
        singles = {member: {member: 1.0} for member in task.members}
        aucs, se = held_out_aucs(task.evidence, task.members, MODEL, singles)
        logits = {member: np.log(weight) + beta * (aucs[member] - aucs[MODEL])
                  / max(se[member], 1e-12) * (member != MODEL)
                  for member, weight in fallback.items()}
        top = max(logits.values())
        raw = {member: float(np.exp(value - top)) for member, value in logits.items()}
        weights = {member: value / sum(raw.values()) for member, value in raw.items()}
        return task.pick({**_named(task.members), "evidence": weights}, "evidence", EVIDENCE_Z)
    return small_tables(rule)


# the weights stacking searches: the three members' weights in steps of a tenth
SIMPLEX = [(a / 10, b / 10, (10 - a - b) / 10) for a in range(11) for b in range(11 - a)]


def shrunk_stacking(z_full: float) -> Rule:
    """Stacking on the cross-fitted folds: on small tables the weights of the three members
    (in tenths) of highest held-out AUC, moved from the fallback towards them by the share
    ``min(1, z / z_full)`` of the way, with ``z`` their lead over the fallback in SE of the
    paired difference. Large tables as before."""
    def rule(task: Task) -> Weights:
        fallback = _model_weighted(FALLBACK_WEIGHTS[MODEL], task.members)
        grid = {f"{i}": {member: w for member, w in zip(task.members, weights, strict=True)
                         if w > 0} for i, weights in enumerate(SIMPLEX)}
        blends = {"fallback": fallback, **grid}
        aucs, se = held_out_aucs(task.evidence, task.members, "fallback", blends)
        best = max(grid, key=lambda name: aucs[name])
        lead = aucs[best] - aucs["fallback"]
        if lead <= 0:
            return fallback
        share = min(1.0, lead / max(se[best], 1e-12) / z_full)
        moved = {member: weight + share * (grid[best].get(member, 0.0) - weight)
                 for member, weight in fallback.items()}
        return {member: weight for member, weight in moved.items() if weight > 1e-12}
    return small_tables(rule)


def fixed_blend(model: float, logistic: float) -> Rule:
    """No evidence on small tables: the model weighed ``model``, the logistic learner
    ``logistic`` and the trees the rest, whatever the folds say (no fold pass of the model is
    then needed at fit). Large tables as before."""
    def rule(task: Task) -> Weights:
        weights = {MODEL: model, LOGISTIC: logistic, task.members[2]: 1.0 - model - logistic}
        return {member: weight for member, weight in weights.items() if weight > 1e-12}
    return small_tables(rule)


def trees_alone(task: Task) -> Weights:
    """The tree member alone (what a count of bags costs it, where it would be chosen)."""
    return {task.members[2]: 1.0}


RULES: dict[str, Rule] = {
    "previous": previous,
    "model alone": model_alone,
    "trees alone": trees_alone,
    **{f"fallback model {w:.2f}": model_weighted_fallback(w) for w in (0.5, 0.6, 0.7)},
    **{f"fallback model 0.60, {z:g} SE": model_weighted_fallback(0.6, z) for z in (2.0, 2.5)},
    **{f"fallback by pi-hat x{k:g}": composition_fallback(k) for k in (1.0, 1.5, 2.0)},
    **{f"leader {w:.1f}{', model only' if only else ''}": leader_weighted_fallback(w, only)
       for w in (0.5, 0.6) for only in (False, True)},
    **{f"model bar {z:g} SE": model_bar(z) for z in (0.0, 1.0)},
    "fallback model 0.60, folds judged": on_judged_rows(model_weighted_fallback(0.6)),
    "large: thirds": large_fallback(None),
    "large: model 0.6": large_fallback(0.6),
    **{f"large: model 0.6 where it leads by {z:g} SE": large_fallback_where_model_leads(z)
       for z in (0.0, 1.0, 2.0)},
    **{f"thirds where they lead the model by {k:g} SE": fallback_unless_thirds_lead(k)
       for k in (0.0, 1.0, 2.0)},
    **{f"cascade {z:g} SE": cascade(z) for z in (1.0, 2.0, 3.0)},
    **{f"evidence weights x{beta:g}": evidence_weights(beta) for beta in (0.1, 0.3, 0.5)},
    **{f"stacking shrunk at {z:g} SE": shrunk_stacking(z) for z in (3.0, 6.0)},
    **{f"fixed model {m:.2f} logistic {lg:.2f}": fixed_blend(m, lg)
       for m, lg in ((0.6, 0.2), (0.6, 0.3), (0.6, 0.4), (0.7, 0.3))},
    **{f"evidence {held}/{judged}": on_less_evidence(model_weighted_fallback(0.6), held, judged)
       for held, judged in ((1000, 2000), (500, 1000), (300, 1000), (300, 700), (300, 500),
                            (500, 500))},
}


# (tree member, rule) of the rule before and of the shipped one: the model-weighted fallback
# on the first 10 of 30 kept bags (the classifier's BAGS)
PREVIOUS = (BAGGED, "previous")
SHIPPED = (f"{BAGGED}10", "fallback model 0.60")


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


def replay_task(path: Path, rules: Mapping[str, Rule] = RULES) -> list[dict]:
    """Per (tree member, rule): the true AUC of the blend the rule picks on this kept task;
    the tree members: PU bagging and its fewer-bags variants where they were kept."""
    data = np.load(path)
    trees = sorted(key.removeprefix("final_") for key in data
                   if key.startswith(f"final_{BAGGED}")) or [BAGGED]
    dataset, _, repetition = path.stem.partition(REPETITION_MARK)
    base = {"dataset": dataset, "repetition": int(repetition or 0), "cell": path.parent.name,
            "n_labeled": int(data["n_labeled"]), "pi": float(data["pi"])}
    y = data["y_pool"]
    if "folds" not in data:  # no portfolio ran: every rule is the model alone
        auc = _auc(y, data["default_pool"])
        return [{**base, "trees": ANY_TREES, "rule": name, "auc": auc} for name in rules]
    folds = int(data["folds"])
    model_folds = [(1 / (1 + np.exp(-data[f"held{k}_{MODEL}"])),
                    1 / (1 + np.exp(-data[f"pool{k}_{MODEL}"]))) for k in range(folds)]
    pi_hat = class_prior_estimate(1 / (1 + np.exp(-data[f"final_{MODEL}"])), model_folds)
    rows = []
    for tree in trees:
        members = (MODEL, LOGISTIC, tree)
        if f"final_{tree}" not in data:
            continue
        evidence = Evidence([{m: data[f"held{k}_{m}"] for m in members} for k in range(folds)],
                            [{m: data[f"pool{k}_{m}"] for m in members} for k in range(folds)])
        final = {m: data[f"final_{m}"] for m in members}
        task = Task(members, evidence, base["n_labeled"], pi_hat)
        proba = 1 / (1 + np.exp(-final[MODEL]))
        for name, rule in rules.items():
            weights = rule(task)
            score = Blend.on_pool(weights, final, proba).score(final)
            rows.append({**base, "trees": tree, "rule": name, "pi_hat": pi_hat,
                         "weights": " ".join(f"{m}:{w:.2f}" for m, w in weights.items()),
                         "auc": _auc(y, score)})
    return rows


def with_every_tree_member(frame: pd.DataFrame) -> pd.DataFrame:
    """The tasks where no portfolio ran (:data:`ANY_TREES`) counted under every tree member."""
    ran = frame[frame["trees"] != ANY_TREES]
    alone = frame[frame["trees"] == ANY_TREES]
    return pd.concat([ran, *(alone.assign(trees=tree) for tree in ran["trees"].unique())],
                     ignore_index=True)


def decision(frame: pd.DataFrame, before: tuple[str, str], after: tuple[str, str],
             ) -> pd.DataFrame:
    """Per cell, one (tree member, rule) against another, paired by task: each one's mean AUC,
    share of tasks more than 0.02 behind the per-task best baseline and worst shortfall; the
    difference after − before and after − the model alone (± SE over tables / repetitions);
    the tasks that cross the 0.02 line each way, and the SE of the change in the count of tasks
    behind (a bootstrap over tables)."""
    key = ["cell", "dataset", "repetition"]

    def picked(trees: str, rule: str) -> pd.DataFrame:
        part = frame[(frame["trees"] == trees) & (frame["rule"] == rule)]
        return part.set_index(key)[["auc", "baseline"]]

    old, new = picked(*before), picked(*after)
    alone = picked(after[0], "model alone")["auc"]
    rows = []
    for cell in sorted(set(new.index.get_level_values("cell"))):
        a, b, m = old.loc[cell], new.loc[cell], alone.loc[cell]
        row = {"cell": cell, "tasks": len(b)}
        for label, part in (("before", a), ("after", b)):
            behind = part["auc"] - part["baseline"]
            row.update({f"auc_{label}": part["auc"].groupby("dataset").mean().mean(),
                        f"behind_{label}": int((behind < -BEHIND_BY).sum()),
                        f"worst_{label}": float(behind.min())})
        for label, other in (("before", a["auc"]), ("alone", m)):
            diff = (b["auc"] - other).rename("d").reset_index()
            row[f"-{label}"] = diff.groupby("dataset")["d"].mean().mean()
            row[f"se_tables_{label}"] = _se(diff.groupby("dataset")["d"].mean())
            row[f"se_seed_{label}"] = _se(diff.groupby("repetition")["d"].mean())
        was = a["auc"] - a["baseline"] < -BEHIND_BY
        now = b["auc"] - b["baseline"] < -BEHIND_BY
        moved = (now.astype(int) - was.astype(int)).groupby(level="dataset").sum()
        row.update({"newly_behind": int((now & ~was).sum()),
                    "no_longer_behind": int((was & ~now).sum()),
                    "behind_se": _count_se(moved),
                    "baseline": b["baseline"].groupby("dataset").mean().mean(),
                    "alone": m.groupby("dataset").mean().mean()})
        rows.append(row)
    return pd.DataFrame(rows).round(4)


def _count_se(per_table: pd.Series, draws: int = 2000) -> float:
    """The standard error of a count summed over tables, by a seeded bootstrap of the tables
    (a table's tasks share its data, so they are resampled together)."""
    values = per_table.to_numpy()
    rng = np.random.default_rng(0)
    totals = values[rng.integers(0, len(values), (draws, len(values)))].sum(axis=1)
    return float(totals.std(ddof=1))


def _baselines(grids: Sequence[Path]) -> pd.Series:
    grid = pd.concat([pd.read_csv(path) for path in grids])
    grid = grid[grid["method"] != "puicl"].drop_duplicates(
        ["dataset", "repetition", "method", "max_positives", "pi_target", "label_frequency"])
    grid["cell"] = [cell_name(int(r.max_positives), r.pi_target,
                              None if np.isnan(r.label_frequency) else r.label_frequency)
                    for r in grid.itertuples()]
    return grid.groupby(["cell", "dataset", "repetition"])["auc"].max().rename("baseline")


def _se(values: pd.Series) -> float:
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell, tree member and rule: mean AUC (tables' means of their repetitions), the
    difference with the model alone and with the previous rule (± SE over tables / over
    repetitions), the share of tasks more than 0.02 behind the per-task best baseline, the
    worst shortfall, and the difference with the model alone on the tables where the model
    alone leads the baseline by more than :data:`LEADS_BY`."""
    key = ["cell", "dataset", "repetition"]
    wide = frame.pivot_table(index=[*key, "trees"], columns="rule", values="auc").reset_index()
    wide = wide.join(frame.drop_duplicates(key).set_index(key)["baseline"], on=key)
    rows = []
    for (cell, trees), part in wide.groupby(["cell", "trees"]):
        per_table = part.groupby("dataset")[["model alone", "baseline"]].mean()
        strong = per_table.index[per_table["model alone"] > per_table["baseline"] + LEADS_BY]
        on_strong = part[part["dataset"].isin(strong)]
        for rule in [name for name in RULES if name in part]:
            row = {"cell": cell, "trees": trees, "rule": rule,
                   "auc": part.groupby("dataset")[rule].mean().mean()}
            for other, label in (("model alone", "alone"), ("previous", "previous")):
                diff = part.assign(d=part[rule] - part[other])
                row[f"-{label}"] = diff.groupby("dataset")["d"].mean().mean()
                row[f"se_tables_{label}"] = _se(diff.groupby("dataset")["d"].mean())
                row[f"se_seed_{label}"] = _se(diff.groupby("repetition")["d"].mean())
            behind = part[rule] - part["baseline"]
            strong_diff = (on_strong[rule] - on_strong["model alone"]).groupby(
                on_strong["dataset"]).mean()
            row.update({"baseline": part.groupby("dataset")["baseline"].mean().mean(),
                        "behind": float((behind < -BEHIND_BY).mean()),
                        "worst": float(behind.min()),
                        "strong_tables": len(strong),
                        "-alone_strong": float(strong_diff.mean()) if len(strong) else np.nan})
            rows.append(row)
    return pd.DataFrame(rows).round(4)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.rule_candidates",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", type=Path, required=True,
                        help="the OUT of studies.portfolio_rule collect")
    parser.add_argument("--grid", type=Path, action="append", required=True,
                        help="a size grid's grid.csv with the baselines (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="per task and rule, CSV")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--rules", default=None,
                        help="replay only these rules, joined by commas (with the model alone, "
                             "the previous and the shipped rule)")
    parser.add_argument("--against", default=None,
                        help="per cell, this rule against the shipped one (default: the "
                             "shipped rule against the previous one)")
    args = parser.parse_args(argv)
    rules = RULES
    if args.rules is not None:
        asked = {"model alone", PREVIOUS[1], SHIPPED[1], *args.rules.split(","),
                 *([] if args.against is None else [args.against])}
        unknown = asked - set(RULES)
        if unknown:
            parser.error(f"--rules: no rule {sorted(unknown)[0]!r}")
        rules = {name: rule for name, rule in RULES.items() if name in asked}
    from joblib import Parallel, delayed

    paths = sorted(args.kept.glob("*/*.npz"))
    if not paths:
        raise SystemExit(f"rule_candidates: no kept task under {args.kept}")
    parts = Parallel(n_jobs=args.jobs)(delayed(replay_task)(path, rules) for path in paths)
    frame = pd.DataFrame([row for part in parts for row in part])
    frame = frame.join(_baselines(args.grid), on=["cell", "dataset", "repetition"])
    frame = with_every_tree_member(frame)
    frame.to_csv(args.out, index=False)
    with pd.option_context("display.width", 250, "display.max_rows", 500):
        print(summary(frame).to_string(index=False))
        before, after = ((PREVIOUS, SHIPPED) if args.against is None
                         else (SHIPPED, (SHIPPED[0], args.against)))
        print(f"\n{after[1]} ({after[0]}) against {before[1]} ({before[0]}), per cell:")
        print(decision(frame, before, after).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
