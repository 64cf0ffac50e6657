"""How the portfolio's rule chooses, measured per task on the development suite.

``collect`` fits the classifier (its default, the portfolio) on every task of the cells asked
for and keeps, per task, what the rule reads (each member's held-out and pool scores) and the
pool's hidden labels, as one ``.npz`` per task. ``evaluate`` then replays any rule on the kept
scores: for each fallback and evidence threshold z, the true AUC of the candidate it picks,
against the model alone, the best candidate in hindsight and the per-task best baseline of a
size grid's ``grid.csv``. Nothing is fitted twice, so every rule is judged on the same scores.

Usage (docs/classifier.md, "Tables of every size")::

    python -m studies.portfolio_rule collect --out results/portfolio --jobs 2 \\
        --cells 600:0.2,600:0.5,all:0.2,all:0.5,all:c0.05,all:c0.2
    python -m studies.portfolio_rule evaluate --out results/portfolio \\
        --grid results/size_grid/grid.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.methods.puicl import as_table
from benchmark.protocol import EVERY_ROW, make_task, method_seed
from benchmark.size_grid import parse_cell
from puicl_model.estimator.learners import (
    BAGGED,
    BOOSTED,
    LOGISTIC,
    CrossFittedLearner,
    row_decision,
)
from puicl_model.estimator.portfolio import (
    EVIDENCE_Z,
    FALLBACK,
    FALLBACK_WITH_HELD_OUT,
    MEMBERS,
    MIN_LABELED_FOR_HOLD_OUT,
    MODEL,
    Blend,
    Evidence,
    candidates,
    held_out_aucs,
)

ZS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, np.inf)
# what collect runs by default: every learner the portfolio runs, so that evaluate can replay
# any set of them (``--members`` adds BOOSTED, the learner PU bagging replaced)
COLLECTED = (MODEL, LOGISTIC, BAGGED)
# PU bagging with only its first bags (a multiple of the learners' folds, so that every fold of
# positives is still scored): kept beside the full member as ``bagged<k>``, read off the same
# fitted bags, so that evaluate can judge what fewer bags would have picked (``--bags`` fits
# more than the classifier's BAGS, ``--fewer-bags`` names the variants)
FEWER_BAGS = (5,)
# a repetition's file: ``<table>.npz`` for repetition 0, ``<table>@<r>.npz`` for the others
REPETITION_MARK = "@"


def cell_name(size: int, pi: float, frequency: float | None) -> str:
    cap = "all" if size == EVERY_ROW else str(size)
    return f"{cap}_c{frequency:g}" if frequency is not None else f"{cap}_pi{pi:g}"


def task_file(out: Path, slug: str, cell: tuple[int, float, float | None],
              repetition: int) -> Path:
    name = slug if repetition == 0 else f"{slug}{REPETITION_MARK}{repetition}"
    return out / cell_name(*cell) / f"{name}.npz"


def first_bags(learner: CrossFittedLearner, bags: int, x_labeled: np.ndarray,
               x_pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PU bagging's out-of-fold log-odds (labeled rows, pool) had it fitted only its first
    ``bags`` bags: the fitted bags' draws are drawn again under their keys, and each row is
    scored by those of the first ``bags`` that did not train on it, as ``fit`` scores it."""
    x_labeled, x_pool = np.asarray(x_labeled, np.float64), np.asarray(x_pool, np.float64)
    n_labeled, n_pool = len(x_labeled), len(x_pool)
    fold = np.random.default_rng(learner._seed()).permutation(n_labeled) % learner.folds
    labeled_sum, labeled_count = np.zeros(n_labeled), np.zeros(n_labeled)
    pool_sum, pool_count = np.zeros(n_pool), np.zeros(n_pool)
    for bag, model in enumerate(learner.models_[:bags]):
        held = fold == bag % learner.folds
        size = min(int((~held).sum()), n_pool)
        drawn = np.random.default_rng(learner._seed(bag)).integers(0, n_pool, size)
        out_of_bag = np.ones(n_pool, dtype=bool)
        out_of_bag[drawn] = False
        pool_sum[out_of_bag] += row_decision(model, x_pool[out_of_bag])
        pool_count[out_of_bag] += 1
        labeled_sum[held] += row_decision(model, x_labeled[held])
        labeled_count[held] += 1
    never_out = pool_count == 0
    if never_out.any():
        pool_sum[never_out] = sum(row_decision(model, x_pool[never_out])
                                  for model in learner.models_[:bags])
        pool_count[never_out] = bags
    return labeled_sum / labeled_count, pool_sum / pool_count


def _fewer_bags_scores(clf: Any, fewer: Sequence[int],
                       ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per variant ``bagged<k>`` of ``fewer``: its (labeled rows', pool's) log-odds, in the
    portfolio's row order."""
    portfolio = clf.portfolio_
    learner = portfolio.learners.get(BAGGED)
    if learner is None:
        return {}
    return {f"{BAGGED}{k}": first_bags(learner, k, portfolio.x_labeled, portfolio.x_pool)
            for k in fewer if k < len(learner.models_)}


def collect_task(slug: str, cell: tuple[int, float, float | None], out: Path,
                 large_pool: str = "shared", repetition: int = 0,
                 members: Sequence[str] = COLLECTED, bags: int | None = None,
                 fewer_bags: Sequence[int] = FEWER_BAGS) -> str:
    import puicl_model.estimator.evidence_rows
    import puicl_model.estimator.learners
    import puicl_model.estimator.portfolio
    from puicl_model import PUICLClassifier

    if bags is not None:  # a study's count of bags on every pool (fewer_bags: their first ones)
        puicl_model.estimator.learners.BAGS = puicl_model.estimator.learners.BAGS_MANY = bags

    # the rule is replayed against the whole pool and every held-out positive: every member
    # scores them all (studies.rule_candidates replays the classifier's samples of them)
    puicl_model.estimator.evidence_rows.JUDGED_POOL_ROWS = 2**62
    puicl_model.estimator.evidence_rows.JUDGED_HELD_OUT = 2**62
    puicl_model.estimator.portfolio.MEMBERS = tuple(members)

    size, pi, frequency = cell
    path = task_file(out, slug, cell, repetition)
    if path.exists():
        with np.load(path) as kept:
            if "final_model" not in kept or len(kept["final_model"]) == len(kept["y_pool"]):
                return str(path)
    task = make_task(load_devsuite_table(slug), repetition, 0, max_positives=size,
                     target_pi=pi, label_frequency=frequency)
    table = as_table(task.X, task.categorical)
    started = time.perf_counter()
    clf = PUICLClassifier(random_state=method_seed(0, slug, repetition, "puicl"), n_threads=1,
                          progress=False, large_pool=large_pool).fit(table, task.s)
    clf.predict_proba(table[task.s == 0] if isinstance(table, np.ndarray)
                      else table.iloc[np.flatnonzero(task.s == 0)])
    seconds = time.perf_counter() - started
    arrays: dict[str, np.ndarray] = {"y_pool": task.y_unlabeled, "repetition": np.array(repetition),
                                     "n_labeled": np.array(task.n_labeled),
                                     "pi": np.array(task.pi), "seconds": np.array(seconds),
                                     "default_pool": clf.fitted_pool_proba()}
    portfolio = clf.portfolio_
    if portfolio is not None and portfolio.evidence is not None:
        evidence = portfolio.evidence
        arrays["folds"] = np.array(len(evidence.held))
        for k, (held, pool) in enumerate(zip(evidence.held, evidence.pool, strict=True)):
            for member in portfolio.members:
                arrays[f"held{k}_{member}"] = held[member]
                arrays[f"pool{k}_{member}"] = pool[member]
        for member, scores in portfolio.member_pool_scores.items():
            arrays[f"final_{member}"] = scores
        arrays.update(_variant_arrays(clf, len(evidence.held), fewer_bags))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    temporary.replace(path)
    return str(path)


def _variant_arrays(clf: Any, folds: int, fewer_bags: Sequence[int],
                    ) -> dict[str, np.ndarray]:
    """The fewer-bags variants' held-out and pool scores, laid out as the members' are: the
    held-out positives' (the last ``n_held_out_`` labeled rows, one fold) or the class prior's
    folds' (each fold's labeled rows), and the whole pool (the judged rows in a collect)."""
    arrays = {}
    n_held = clf.n_held_out_
    masks = ([None] if n_held else clf.fitted_.fold_masks(folds))
    for name, (labeled, pool) in _fewer_bags_scores(clf, fewer_bags).items():
        for k, mask in enumerate(masks):
            arrays[f"held{k}_{name}"] = labeled[-n_held:] if mask is None else labeled[mask]
            arrays[f"pool{k}_{name}"] = pool
        arrays[f"final_{name}"] = pool
    return arrays


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


def evaluate_task(path: Path, members: Sequence[str] = MEMBERS) -> list[dict]:
    """Per rule (fallback, z): the true AUC of the candidate the rule picks on this task, the
    portfolio running ``members``."""
    data = np.load(path)
    blends = candidates(members)
    y = data["y_pool"]
    dataset, _, repetition = path.stem.partition(REPETITION_MARK)
    base = {"dataset": dataset, "repetition": int(repetition or 0), "cell": path.parent.name,
            "n_labeled": int(data["n_labeled"]),
            "pi": float(data["pi"]), "default": _auc(y, data["default_pool"])}
    if "folds" not in data:
        return [{**base, "fallback": f, "z": z, "picked": "model", "auc": base["default"],
                 "model": base["default"], "oracle": base["default"]}
                for f in blends for z in ZS]
    folds = int(data["folds"])
    evidence = Evidence([{m: data[f"held{k}_{m}"] for m in members} for k in range(folds)],
                        [{m: data[f"pool{k}_{m}"] for m in members} for k in range(folds)])
    final = {m: data[f"final_{m}"] for m in members}
    model_proba = 1.0 / (1.0 + np.exp(-final[MODEL]))
    true = {name: _auc(y, Blend.on_pool(weights, final, model_proba).score(final))
            for name, weights in blends.items()}
    rows = []
    for fallback in blends:
        aucs, se = held_out_aucs(evidence, members, fallback)
        best = max(aucs, key=lambda name: aucs[name])
        for z in ZS:
            lead = aucs[best] - aucs[fallback]
            picked = best if best != fallback and lead > z * se[best] else fallback
            rows.append({**base, "fallback": fallback, "z": z, "picked": picked,
                         "auc": true[picked], "model": true["model"],
                         "oracle": max(true.values()),
                         **{f"true_{name}": value for name, value in true.items()}})
    return rows


def _collect(args: argparse.Namespace) -> int:
    from joblib import Parallel, delayed

    cells = [parse_cell(part) for part in args.cells.split(",")]
    slugs = devsuite_slugs() if args.datasets == "all" else args.datasets.split(",")
    members = tuple(args.members.split(","))
    jobs = [(slug, cell, repetition) for repetition in range(args.repeats) for cell in cells
            for slug in slugs]
    done = Parallel(n_jobs=args.jobs, verbose=5)(
        delayed(collect_task)(slug, cell, args.out, args.large_pool, repetition, members,
                              args.bags, [int(k) for k in args.fewer_bags.split(",") if k])
        for slug, cell, repetition in jobs)
    print(f"portfolio_rule: {len(done)} tasks in {args.out}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    members = tuple(args.members.split(","))
    rows = [row for path in sorted(args.out.glob("*/*.npz"))
            for row in evaluate_task(path, members)]
    frame = pd.DataFrame(rows)
    if args.grid:
        grid = pd.concat([pd.read_csv(path) for path in args.grid]).drop_duplicates(
            ["dataset", "repetition", "method", "max_positives", "pi_target", "label_frequency"])
        grid = grid[grid["method"] != "puicl"]
        grid["cell"] = [cell_name(int(r.max_positives), r.pi_target,
                                  None if np.isnan(r.label_frequency) else r.label_frequency)
                        if "label_frequency" in grid else
                        cell_name(int(r.max_positives), r.pi_target, None)
                        for r in grid.itertuples()]
        key = ["cell", "dataset", "repetition"]
        best = grid.groupby(key)["auc"].max().rename("baseline")
        frame = frame.join(best, on=key)
    frame.to_csv(args.out / f"rules_{'+'.join(members)}.csv", index=False)
    summary = rule_summary(frame)
    print(summary.to_string())
    if "baseline" in frame:
        rules = [tuple(rule.split(":")) for rule in args.rules.split(",")]
        print(sized_rules(frame, [(small, large, float(z)) for small, large, z in rules])
              .to_string())
    return 0


def sized_rules(frame: pd.DataFrame, rules: Sequence[tuple[str, str, float]]) -> pd.DataFrame:
    """Per cell, the rules as the classifier runs them: fallback ``small`` and bar ``z`` on
    tables below MIN_LABELED_FOR_HOLD_OUT labeled positives, fallback ``large`` from there on.
    Columns: mean AUC, the share of tasks more than 0.02 behind the per-task best baseline,
    the worst shortfall, and the mean gain over the model alone."""
    large = frame["n_labeled"] >= MIN_LABELED_FOR_HOLD_OUT
    parts = []
    for small_fallback, large_fallback, z in rules:
        picked = frame[(frame["z"] == z) & np.where(large, frame["fallback"] == large_fallback,
                                                    frame["fallback"] == small_fallback)]
        behind = picked["auc"] - picked["baseline"]
        parts.append(picked.assign(rule=f"{small_fallback} / {large_fallback}, {z:g} SE",
                                   behind=behind, gain=picked["auc"] - picked["model"]))
    table = pd.concat(parts).groupby(["rule", "cell"], sort=False)
    return pd.DataFrame({
        "auc": table["auc"].mean(), "baseline": table["baseline"].mean(),
        "behind_0.02": table["behind"].apply(lambda v: (v < -0.02).mean()),
        "worst": table["behind"].min(), "gain_over_model": table["gain"].mean(),
    }).round(4)


def rule_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell and rule: mean AUC, mean gain over the model alone, the share of tasks where
    the pick is worse than the model by > 0.02, and against the per-task best baseline."""
    frame = frame.assign(gain=frame["auc"] - frame["model"],
                         regret=frame["oracle"] - frame["auc"])
    aggregations = {"auc": "mean", "gain": "mean", "regret": "mean",
                    "worse_than_model": ("gain", lambda g: (g < -0.02).mean())}
    if "baseline" in frame:
        frame = frame.assign(vs_best=frame["auc"] - frame["baseline"])
        aggregations.update({"baseline": "mean", "vs_best": "mean",
                             "behind": ("vs_best", lambda g: (g < -0.02).mean()),
                             "worst": ("vs_best", "min")})
    named = {key: value if isinstance(value, tuple) else (key, value)
             for key, value in aggregations.items()}
    return frame.groupby(["cell", "fallback", "z"]).agg(**named).round(4)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.portfolio_rule",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    collect = sub.add_parser("collect", help="fit the default on every task, keep the scores")
    collect.add_argument("--out", type=Path, required=True)
    collect.add_argument("--cells", default="600:0.2,600:0.5,all:0.2,all:0.5,all:c0.05,all:c0.2")
    collect.add_argument("--datasets", default="all")
    collect.add_argument("--jobs", type=int, default=2)
    collect.add_argument("--large-pool", choices=("chunks", "shared"), default="shared",
                         help="how the classifier scores pools larger than one pass")
    collect.add_argument("--repeats", type=int, default=1,
                         help="repetitions 0 .. N-1 of every task (the size grid's draws)")
    collect.add_argument("--members", default=",".join(COLLECTED),
                         help=f"the members the portfolio runs (of {MODEL},{LOGISTIC},"
                         f"{BOOSTED},{BAGGED})")
    collect.add_argument("--bags", type=int, default=None,
                         help="PU bagging's bags (default: the classifier's)")
    collect.add_argument("--fewer-bags", default=",".join(map(str, FEWER_BAGS)),
                         help="variants kept as bagged<k>: the first k bags alone")
    evaluate = sub.add_parser("evaluate", help="replay the rules on the kept scores")
    evaluate.add_argument("--out", type=Path, required=True)
    evaluate.add_argument("--members", default=",".join(MEMBERS),
                          help="the members the replayed portfolio runs (of those collected)")
    evaluate.add_argument("--rules", default=f"{FALLBACK}:{FALLBACK_WITH_HELD_OUT}:{EVIDENCE_Z:g}",
                          help="sized rules to judge per cell, SMALL_FALLBACK:LARGE_FALLBACK:Z "
                          "joined by commas (default: the shipped rule)")
    evaluate.add_argument("--grid", type=Path, action="append", default=[],
                          help="a size grid's grid.csv with the baselines of the same cells "
                          "and repetitions (repeatable)")
    args = parser.parse_args(argv)
    return _collect(args) if args.command == "collect" else _evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
