"""Rules and learners replayed on the scores ``studies/portfolio_evidence.py`` kept, judged per
task against every alternative a user has.

A rule reads what the classifier has when it chooses (each member's held-out and pool scores,
the number of labeled positives) and returns the candidate it picks; its true AUC is the pool
AUC of that candidate's blend of the final scores. Every rule and learner is judged on the same
scores, so differences between them carry no seed noise of their own.

The alternatives of a task: each member alone (the model, the logistic learner, the bag
learner), the model alone as a user runs it where it differs from the default's model scores
(a table with held-out positives), and the benchmark's PU-bagging and Elkan–Noto adapters
(``--alternatives``: the user yardstick's records, or a size grid's per-task CSVs).

    python -m studies.portfolio_replay --kept results/evidence/user \\
        --user-records results/user_base
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from puicl_model.estimator.learners import log_odds
from puicl_model.estimator.portfolio import (
    FALLBACK_WEIGHTS,
    Blend,
    Evidence,
    blends_for,
    held_out_aucs,
)
from puicl_model.estimator.portfolio_rule import (
    BAGGED,
    BAGGED_BOOSTED,
    TREES_Z,
    clearly_leading,
    fallback_weights,
    stronger_trees,
)

MODEL, LOGISTIC = "model", "logistic"
BAR = 0.01


@dataclass
class Kept:
    """One kept task."""

    name: str
    group: str
    kind: str  # "held", "folds" or "alone"
    y: np.ndarray
    n_labeled: int
    pi: float
    final: dict[str, np.ndarray]  # per member: log-odds of every fitted pool row
    held: list[dict[str, np.ndarray]]  # per fold: per member, log-odds of its held positives
    pool: list[dict[str, np.ndarray]]  # per fold: per member, log-odds of the pool
    seconds: dict[str, float]
    # per learner: its out-of-fold log-odds of every labeled positive (what the bag learners'
    # own evidence reads, portfolio_rule.stronger_trees)
    labeled: dict[str, np.ndarray] = field(default_factory=dict)

    def evidence(self, members: Sequence[str], pool_rows: np.ndarray | None = None,
                 held_rows: np.ndarray | None = None) -> Evidence:
        def cut(scores: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
            return scores if rows is None else scores[rows[rows < len(scores)]]
        return Evidence([{m: cut(h[m], held_rows) for m in members} for h in self.held],
                        [{m: cut(p[m], pool_rows) for m in members} for p in self.pool])


def load(path: Path, root: Path) -> Kept:
    data = np.load(path)
    kind = str(data["kind"])
    learners = sorted({key[: -len("_labeled")] for key in data.files
                       if key.endswith("_labeled")
                       and f"{key[: -len('_labeled')]}_pool" in data.files})
    final = {MODEL: log_odds(data["model_pool"]), **{k: data[f"{k}_pool"] for k in learners}}
    held, pool = [], []
    folds = 2 if kind == "folds" else 1 if kind == "held" else 0
    for k in range(folds):
        mask = data[f"mask{k}"]
        held.append({MODEL: log_odds(data[f"model_held{k}"]),
                     **{name: data[f"{name}_labeled"][mask] for name in learners}})
        pool.append({MODEL: log_odds(data[f"model_pool{k}"]),
                     **{name: data[f"{name}_pool"] for name in learners}})
    seconds = {key[: -len("_seconds")]: float(data[key]) for key in data.files
               if key.endswith("_seconds")}
    seconds["fit"] = float(data["seconds"])
    name = str(path.relative_to(root).with_suffix(""))
    return Kept(name, str(data["group"]), kind, data["y_pool"], int(data["n_labeled"]),
                float(data["pi"]), final, held, pool, seconds,
                {k: data[f"{k}_labeled"] for k in learners})


def true_auc(kept: Kept, weights: Mapping[str, float]) -> float:
    if len(weights) == 1:
        return float(roc_auc_score(kept.y, kept.final[next(iter(weights))]))
    proba = 1.0 / (1.0 + np.exp(-kept.final[MODEL]))
    blend = Blend.on_pool(weights, kept.final, proba)
    return float(roc_auc_score(kept.y, blend.score(kept.final)))


# -------------------------------------------------------------------------------- rules
Rule = Callable[[Kept, Sequence[str]], str]


def shipped(kept: Kept, members: Sequence[str]) -> str:
    """Today's rule: below 600 labeled the model-weighted fallback unread; from there the
    fallback follows the model's held-out AUC against the logistic learner's, and a candidate
    replaces it where it leads by 3 SE."""
    if kept.kind != "held":
        return "model-weighted"
    return _lead_rule(kept, members, _shipped_fallback(kept, members), 3.0)


def _shipped_fallback(kept: Kept, members: Sequence[str]) -> str:
    pair = {MODEL: {MODEL: 1.0}, LOGISTIC: {LOGISTIC: 1.0}}
    aucs, _ = held_out_aucs(kept.evidence((MODEL, LOGISTIC)), (MODEL, LOGISTIC), LOGISTIC, pair)
    return "model-weighted" if aucs[MODEL] > aucs[LOGISTIC] else LOGISTIC


def _lead_rule(kept: Kept, members: Sequence[str], fallback: str, z: float,
               blends: Mapping[str, Mapping[str, float]] | None = None,
               clearest: bool = False) -> str:
    blends = dict(blends_for(members, "model-weighted")) if blends is None else blends
    aucs, se = held_out_aucs(kept.evidence(members), members, fallback, blends)
    if clearest:
        return _clearest(aucs, se, fallback, z)
    best = max(aucs, key=lambda name: aucs[name])
    return best if best != fallback and aucs[best] - aucs[fallback] > z * se[best] else fallback


def _clearest(aucs: Mapping[str, float], se: Mapping[str, float], fallback: str,
              z: float) -> str:
    """Of the candidates leading ``fallback`` by more than ``z`` SE, the highest held-out AUC;
    the fallback where none does."""
    leading = clearly_leading(aucs, se, fallback, z)
    return max(leading, key=lambda name: aucs[name]) if leading else fallback


def lead_over_best_member(z: float, model_weighted_when_model_leads: bool = True) -> Rule:
    """Evidence at every size: the member of highest held-out AUC stands (the model-weighted
    blend where that member is the model, if asked), and a blend replaces it where it leads by
    ``z`` SE."""
    def rule(kept: Kept, members: Sequence[str]) -> str:
        if kept.kind == "alone":
            return MODEL
        singles = {m: {m: 1.0} for m in members}
        aucs, _ = held_out_aucs(kept.evidence(members), members, members[0], singles)
        best = max(aucs, key=lambda name: aucs[name])
        fallback = ("model-weighted" if best == MODEL and model_weighted_when_model_leads
                    else best)
        return _lead_rule(kept, members, fallback, z)
    rule.__name__ = f"best member, blends by {z:g} SE" + (
        "" if model_weighted_when_model_leads else " (model alone)")
    return rule


def everywhere_shipped_fallback(z: float) -> Rule:
    """Evidence at every size with today's fallback rule (the model-weighted blend where the
    model's held-out AUC is above the logistic learner's)."""
    def rule(kept: Kept, members: Sequence[str]) -> str:
        if kept.kind == "alone":
            return MODEL
        return _lead_rule(kept, members, _shipped_fallback(kept, members), z)
    rule.__name__ = f"shipped fallback everywhere, {z:g} SE"
    return rule


def fixed_fallback(z: float, fallback: str = "model-weighted") -> Rule:
    """Evidence at every size, the fallback fixed: a candidate replaces it where it leads by
    ``z`` SE."""
    def rule(kept: Kept, members: Sequence[str]) -> str:
        if kept.kind == "alone":
            return MODEL
        return _lead_rule(kept, members, fallback, z)
    rule.__name__ = f"{fallback} unless a candidate leads by {z:g} SE"
    return rule


def small_then_shipped(z_small: float) -> Rule:
    """Below 600 labeled: the model-weighted blend unless a candidate leads it by ``z_small``
    SE on the class prior's folds; from 600 on, the shipped rule."""
    small = fixed_fallback(z_small)

    def rule(kept: Kept, members: Sequence[str]) -> str:
        return shipped(kept, members) if kept.kind == "held" else small(kept, members)
    return rule


def fallback_trees(kept: Kept, members: Sequence[str], z: float = TREES_Z) -> str:
    """The bag learner in the model-weighted blend's tree place as the classifier picks it
    (``portfolio_rule.stronger_trees``): a fourth member, the boosted bags' stand-in, where
    its out-of-fold scores lead the forests' by ``z`` SE; ``bagged`` otherwise."""
    if len(members) < 4 or not {BAGGED, members[3]} <= set(kept.labeled):
        return BAGGED
    labeled = {BAGGED: kept.labeled[BAGGED], BAGGED_BOOSTED: kept.labeled[members[3]]}
    pool = {BAGGED: kept.final[BAGGED], BAGGED_BOOSTED: kept.final[members[3]]}
    return members[3] if stronger_trees(labeled, pool, z)[0] == BAGGED_BOOSTED else BAGGED


def _with_trees(pick: str, kept: Kept, members: Sequence[str], z: float | None) -> str:
    """A pick as :func:`judge` scores it: where it is the model-weighted blend and ``z`` is
    given, with the trees :func:`fallback_trees` puts in its place spelled out."""
    if pick != "model-weighted" or z is None:
        return pick
    trees = fallback_trees(kept, members, z)
    if trees == BAGGED:
        return pick
    return BLEND_PREFIX + "+".join(f"{m}={w:g}" for m, w in fallback_weights(trees).items())


def adaptive(z: float, start: tuple[int, int] = (300, 500),
             most: tuple[int, int] = (1000, 4000), small_z: float | None = None,
             clearest: bool = False, trees: float | None = None) -> Rule:
    """The shipped rule on a table with held-out positives, read as far as the decision needs:
    from ``start`` (held-out positives, pool rows) the sample doubles, up to ``most``, while the
    best candidate leads the fallback by between 1 and ``z`` SE. Below 600 labeled: the
    model-weighted blend, unless ``small_z`` is given (then a candidate replaces it on the
    class prior's folds where it leads by ``small_z`` SE). ``trees``: the bar (SE) at which
    :func:`fallback_trees` puts the boosted bags in the model-weighted blend's tree place,
    where that blend stands (None: the forests stay)."""
    def rule(kept: Kept, members: Sequence[str]) -> str:
        if kept.kind == "alone":
            return MODEL
        blends = dict(blends_for(members, "model-weighted"))
        if kept.kind != "held":
            pick = ("model-weighted" if small_z is None
                    else _lead_rule(kept, members, "model-weighted", small_z,
                                    blends=blends, clearest=clearest))
        else:
            pick = _held_rule(kept, members, blends)
        return _with_trees(pick, kept, members, trees)

    def _held_rule(kept: Kept, members: Sequence[str],
                   blends: Mapping[str, Mapping[str, float]]) -> str:
        rng = np.random.default_rng(0)
        held_order = rng.permutation(len(kept.held[0][MODEL]))
        pool_order = rng.permutation(len(kept.pool[0][MODEL]))
        n_held, n_pool = start
        while True:
            evidence = kept.evidence(members, np.sort(pool_order[:n_pool]),
                                     np.sort(held_order[:n_held]))
            pair = {MODEL: {MODEL: 1.0}, LOGISTIC: {LOGISTIC: 1.0}}
            pair_aucs, _ = held_out_aucs(evidence, (MODEL, LOGISTIC), LOGISTIC, pair)
            fallback = "model-weighted" if pair_aucs[MODEL] > pair_aucs[LOGISTIC] else LOGISTIC
            aucs, se = held_out_aucs(evidence, members, fallback, blends)
            best = max(aucs, key=lambda name: aucs[name])
            lead = aucs[best] - aucs[fallback]
            done = (n_held >= min(most[0], len(held_order))
                    and n_pool >= min(most[1], len(pool_order)))
            clear = _clearest(aucs, se, fallback, z) if clearest else fallback
            if clear != fallback:
                return clear
            if best == fallback or lead > z * se[best] or lead < se[best] or done:
                return best if best != fallback and lead > z * se[best] else fallback
            n_held, n_pool = 2 * n_held, 2 * n_pool
    rule.__name__ = f"adaptive {z:g} SE"
    return rule


def highest(kept: Kept, members: Sequence[str]) -> str:
    """The candidate of highest held-out AUC, no bar."""
    if kept.kind == "alone":
        return MODEL
    return _lead_rule(kept, members, "model-weighted", 0.0)


def oracle(kept: Kept, members: Sequence[str]) -> str:
    """The candidate of highest true pool AUC: no rule reading evidence can do better with
    these members, so where it misses the bar the members, not the rule, fall short."""
    blends = dict(blends_for(members, "model-weighted"))
    return max(blends, key=lambda name: true_auc(kept, blends[name]))


BLEND_PREFIX = "blend:"


def blend_weights(spec: str) -> dict[str, float]:
    """The weights of a fixed blend spelled ``member=weight+member=weight``."""
    weights = {}
    for part in spec.split("+"):
        member, _, weight = part.partition("=")
        if not member or not weight:
            raise ValueError(f"a blend is spelled member=weight+member=weight, got {spec!r}")
        weights[member] = float(weight)
    return weights


def fixed_blend(spec: str) -> Rule:
    """The blend ``spec`` on every table (``member=weight+...``): what a fallback of those
    weights would score, evidence unread."""
    blend_weights(spec)  # refused here, before any task is read

    def rule(kept: Kept, members: Sequence[str]) -> str:
        return BLEND_PREFIX + spec
    rule.__name__ = f"the blend {spec}"
    return rule


def rule_named(name: str) -> Rule:
    """A rule of :data:`RULES`, or a fixed blend named ``blend:member=weight+...``."""
    if name.startswith(BLEND_PREFIX):
        return fixed_blend(name[len(BLEND_PREFIX):])
    if name not in RULES:
        raise SystemExit(f"no rule {name!r}; the rules: {', '.join(RULES)}, or blend:m=w+m=w")
    return RULES[name]


RULES: dict[str, Rule] = {
    "shipped": shipped, "highest": highest, "oracle": oracle,
    **{f"member-z{z:g}": lead_over_best_member(z) for z in (0.0, 1.0, 2.0, 3.0)},
    **{f"member-alone-z{z:g}": lead_over_best_member(z, False) for z in (1.0, 2.0)},
    **{f"shipped-everywhere-z{z:g}": everywhere_shipped_fallback(z) for z in (1.0, 2.0, 3.0)},
    **{f"mw-z{z:g}": fixed_fallback(z) for z in (2.0, 3.0, 4.0)},
    **{f"small-z{z:g}": small_then_shipped(z) for z in (2.0, 3.0, 4.0)},
    **{f"adaptive-z{z:g}": adaptive(z) for z in (1.5, 2.0, 2.5, 3.0)},
    "adaptive-all-z3": adaptive(3.0, start=(10**9, 10**9)),
    "adaptive-z3-small3": adaptive(3.0, small_z=3.0),
    "clearest-z3-small3": adaptive(3.0, small_z=3.0, clearest=True),
    **{f"trees{t:g}-z3-small3": adaptive(3.0, small_z=3.0, clearest=True, trees=t)
       for t in (1.0, 2.0, 3.0)},
}


# --------------------------------------------------------------------------- alternatives
def user_alternatives(records: Path) -> pd.DataFrame:
    """Per generated table: the model alone's and both adapters' AUC as a user ran them."""
    rows = [json.loads(p.read_text()) for p in sorted(records.glob("*/*.json"))]
    frame = pd.DataFrame(rows)
    frame = frame[frame["method"].isin(["model", "pu-bagging", "elkan-noto"])]
    return frame.pivot(index="table", columns="method", values="auc").rename(
        columns={"model": "model_alone"})


def dev_alternatives(grid_dir: Path) -> pd.DataFrame:
    """Per size-grid task (``<cell>/<table>``, repetition 0): both adapters' AUC from the grid's
    ``grid.csv`` and the model alone's from the every-row cells' per-task files."""
    from studies.portfolio_rule import cell_name

    grid = pd.read_csv(grid_dir / "grid.csv")
    grid = grid[(grid["repetition"] == 0) & grid["method"].isin(["pu-bagging", "elkan-noto"])]
    frequency = [None if np.isnan(f) else f for f in grid["label_frequency"]]
    grid["task"] = [f"{cell_name(int(r.max_positives), r.pi_target, f)}/{r.dataset}"
                    for r, f in zip(grid.itertuples(), frequency, strict=True)]
    frame = grid.pivot(index="task", columns="method", values="auc")
    alone = []
    for cell in ("pi0.2", "pi0.5", "c0.05", "c0.2"):
        path = grid_dir / f"every_row_{cell}.csv"
        if path.exists():
            rows = pd.read_csv(path)
            rows = rows[rows["repetition"] == 0]
            alone.append(pd.Series(rows["alone"].to_numpy(),
                                   index=[f"all_{cell}/{d}" for d in rows["dataset"]]))
    if alone:
        frame["model_alone"] = pd.concat(alone)
    return frame


def judge(kept: Sequence[Kept], members: Sequence[str], rules: Mapping[str, Rule],
          alternatives: pd.DataFrame | None) -> pd.DataFrame:
    rows = []
    for task in kept:
        singles = {m: true_auc(task, {m: 1.0}) for m in task.final}
        base = {"task": task.name, "group": task.group, "kind": task.kind,
                "n_labeled": task.n_labeled, "pi": task.pi,
                **{f"alone_{m}": v for m, v in singles.items()}}
        alts = [singles[m] for m in members if m in singles]  # "alone" tasks: the model
        key = task.name if "/" in task.name else task.name.split("/")[-1]
        if alternatives is not None and key in alternatives.index:
            extra = alternatives.loc[key]
            base.update({k: float(v) for k, v in extra.items()})
            alts += [float(v) for v in extra.values if np.isfinite(v)]
        base["best_alternative"] = max(alts)
        blends = dict(blends_for(members, "model-weighted"))
        for rule_name, rule in rules.items():
            picked = MODEL if task.kind == "alone" else rule(task, members)
            weights = (blend_weights(picked[len(BLEND_PREFIX):])
                       if picked.startswith(BLEND_PREFIX) else blends.get(picked, {picked: 1.0}))
            auc = true_auc(task, weights)
            rows.append({**base, "rule": rule_name, "picked": picked, "auc": auc,
                         "vs_best": auc - base["best_alternative"]})
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    groups = frame.groupby(["rule", "group"])
    table = pd.DataFrame({
        "tasks": groups.size(), "auc": groups["auc"].mean(),
        "best_alt": groups["best_alternative"].mean(),
        "vs_best": groups["vs_best"].mean(),
        "within_bar": groups["vs_best"].apply(lambda v: (v >= -BAR).mean()),
        "worst": groups["vs_best"].min()})
    overall = frame.groupby("rule")
    total = pd.DataFrame({
        "tasks": overall.size(), "auc": overall["auc"].mean(),
        "best_alt": overall["best_alternative"].mean(), "vs_best": overall["vs_best"].mean(),
        "within_bar": overall["vs_best"].apply(lambda v: (v >= -BAR).mean()),
        "worst": overall["vs_best"].min()})
    total.index = pd.MultiIndex.from_tuples([(r, "ALL") for r in total.index])
    return pd.concat([table, total]).sort_index().round(4)


def paired(frame: pd.DataFrame, against: str) -> pd.DataFrame:
    """Per rule: the mean and SE over tasks of its AUC minus rule ``against``'s on the same
    task, and how many picks differ."""
    wide = frame.pivot(index="task", columns="rule", values="auc")
    picks = frame.pivot(index="task", columns="rule", values="picked")
    rows = {}
    for rule in wide.columns:
        diff = (wide[rule] - wide[against]).to_numpy()
        rows[rule] = {"tasks": len(diff), "difference": diff.mean(),
                      "se": diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan,
                      "picks_changed": int((picks[rule] != picks[against]).sum()),
                      "worst": diff.min()}
    return pd.DataFrame(rows).T.round(4)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.portfolio_replay",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", type=Path, required=True)
    parser.add_argument("--user-records", type=Path, default=None)
    parser.add_argument("--grid", type=Path, default=None,
                        help="a size grid's folder (grid.csv, every_row_*.csv): the dev "
                        "tasks' adapters and model alone")
    parser.add_argument("--bag", default="bagged", help="the bag learner the portfolio runs")
    parser.add_argument("--extra", default="",
                        help="learners the portfolio runs beside the three (commas)")
    parser.add_argument("--kinds", default="alone,folds,held", help="the tasks' kinds judged")
    parser.add_argument("--rules", default=",".join(RULES),
                        help="rules to judge (commas; the first is the one the others are "
                        "paired against), each a name of RULES or a fixed blend "
                        "blend:member=weight+member=weight")
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args(argv)
    kept = [load(path, args.kept) for path in sorted(args.kept.rglob("*.npz"))
            if not path.name.endswith(".tmp.npz")]
    alternatives = (user_alternatives(args.user_records) if args.user_records
                    else dev_alternatives(args.grid) if args.grid else None)
    members = (MODEL, LOGISTIC, args.bag)
    if args.bag != "bagged":  # the variant stands in the shipped member's place
        for task in kept:
            for scores in [task.final, *task.held, *task.pool]:
                if args.bag in scores:
                    scores["bagged"] = scores[args.bag]
        members = (MODEL, LOGISTIC, "bagged")
    members = (*members, *[m for m in args.extra.split(",") if m])
    kept = [task for task in kept if task.kind in args.kinds.split(",")]
    # the class prior's folds of a large shared-context pool read a sample of its rows that
    # the kept file does not name: such tasks cannot be replayed on the learners' pool scores
    sampled = [task for task in kept if any(len(p[MODEL]) != len(task.final[MODEL])
                                            for p in task.pool)]
    if sampled:
        print(f"left out {len(sampled)} task(s) whose folds read a sample of the pool",
              file=sys.stderr)
        kept = [task for task in kept if task not in sampled]
    assert set(FALLBACK_WEIGHTS) <= set(members)
    names = args.rules.split(",")
    frame = judge(kept, members, {r: rule_named(r) for r in names}, alternatives)
    pd.set_option("display.width", 220)
    pd.set_option("display.max_rows", 500)
    print(summarize(frame).to_string())
    if len(names) > 1:
        print(f"\npaired against {names[0]}:")
        print(paired(frame, names[0]).to_string())
    if args.csv:
        frame.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------- calibration
def fold_scores(kept: Kept, weights: Mapping[str, float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per fold of the evidence: the blend's scores of its held-out positives and of the pool,
    standardized on the fold's pool (as the choice reads them)."""
    from puicl_model.estimator.portfolio_rule import blended, standardizer

    out = []
    for held, pool in zip(kept.held, kept.pool, strict=True):
        standard = {m: standardizer(np.asarray(pool[m], dtype=np.float64)) for m in weights}
        out.append((blended(weights, held, standard), blended(weights, pool, standard)))
    return out


def final_scores(kept: Kept, weights: Mapping[str, float]) -> np.ndarray:
    from puicl_model.estimator.portfolio_rule import blended, standardizer

    standard = {m: standardizer(np.asarray(kept.final[m], dtype=np.float64)) for m in weights}
    return blended(weights, kept.final, standard)


def positive_density(folds: Sequence[tuple[np.ndarray, np.ndarray]], bins: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The held-out positives' density over the pool's quantiles (bin edges, density per
    bin), made non-decreasing: under SCAR, P(y = 1 | a pool row at quantile u) = α g(u)."""
    from sklearn.isotonic import IsotonicRegression

    edges = np.linspace(0.0, 1.0, bins + 1)
    counts = np.zeros(bins)
    total = 0
    for held, pool in folds:
        pool_sorted = np.sort(pool)
        u = (np.searchsorted(pool_sorted, held, side="left")
             + np.searchsorted(pool_sorted, held, side="right")) / (2.0 * len(pool_sorted))
        counts += np.histogram(np.clip(u, 0, 1), bins=edges)[0]
        total += len(held)
    density = counts / total * bins
    centres = (edges[:-1] + edges[1:]) / 2
    return edges, IsotonicRegression(increasing=True).fit(centres, density).predict(centres)


def calibration_rows(kept: Kept, name: str, weights: Mapping[str, float],
                     bins: int = 20) -> dict[str, float]:
    from puicl_model.estimator.prior import best_bin_estimate, mean_estimate

    folds = fold_scores(kept, weights)
    final = final_scores(kept, weights)
    u = (np.argsort(np.argsort(final, kind="stable"), kind="stable") + 0.5) / len(final)
    edges, density = positive_density(folds, bins)
    g = density[np.clip(np.searchsorted(edges, u, side="right") - 1, 0, bins - 1)]
    truth = 1.0 - kept.pi
    model_proba = 1.0 / (1.0 + np.exp(-kept.final[MODEL]))
    # today's probabilities: the model's pool distribution by the blend's ranks
    shipped = np.sort(model_proba)[np.argsort(np.argsort(final, kind="stable"), kind="stable")]
    pi_bbe = best_bin_estimate(folds)
    pi_mean = mean_estimate(model_proba)
    row = {"task": kept.name, "group": kept.group, "candidate": name, "pi": kept.pi,
           "auc": float(roc_auc_score(kept.y, final)),
           "pi_bbe": pi_bbe, "pi_mean": pi_mean, "pi_shipped": max(pi_mean, pi_bbe),
           "share_shipped": float(np.mean(shipped > 0.5)),
           "acc_shipped": float(np.mean((shipped > 0.5) == kept.y)),
           "g_top": float(density[-1])}
    for label, pi_hat in (("bbe", pi_bbe), ("max", max(pi_mean, pi_bbe))):
        proba = np.minimum(1.0, (1.0 - pi_hat) * g)
        row[f"share_{label}"] = float(np.mean(proba > 0.5))
        row[f"acc_{label}"] = float(np.mean((proba > 0.5) == kept.y))
        row[f"mean_{label}"] = float(proba.mean())
        order = np.argsort(final, kind="stable")
        prior_labels = np.zeros(len(final), dtype=int)
        prior_labels[order[round(pi_hat * len(final)):]] = 1
        row[f"acc_prior_{label}"] = float(np.mean(prior_labels == kept.y))
    row["truth"] = truth
    row["acc_oracle_prior"] = float(np.mean(
        np.isin(np.arange(len(final)), np.argsort(final)[round(kept.pi * len(final)):])
        == kept.y))
    row["acc_all_positive"] = truth
    return row
