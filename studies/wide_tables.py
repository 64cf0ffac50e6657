"""The fallback's members on wide tables, judged on both kinds of wide table: the generated ones
(``studies/user_tables.py``) and the development suite's tasks widened with uninformative
columns, real signals the generated tables do not hold.

``collect`` fits the default classifier on each task as the studies fit it and keeps, per task
(one ``.npz``): the pool's hidden labels, the default's P(y = 1) of every pool row, the model's
log-odds of every pool row, each fitted learner's out-of-fold log-odds of the labeled rows and
of the pool, and the boosted bags fitted on the same rows in a fit's bags
(``learners.bag_count``, ``bb``) and in ``BOOSTED_BAGS_CHOSEN`` (``bb30``), with the feature
groups the model read the table in. ``--widen N`` appends N uninformative columns to each
development-suite task (standard normal, three in ten exponentiated, keyed by the task's name).

``report`` judges fixed blends of the kept scores (each member standardized on the pool, as the
portfolio blends them) per task against a reference blend: the mean difference with its SE,
the tasks more than 0.01 above and below it, and how many are within 0.01 of the best member
alone; ``--per-task`` lists each task's AUCs and the boosted bags' own lead over the forests in
standard errors (``portfolio_rule.stronger_trees``, on the fit's bags). Blends are named by
their weights, ``member:weight`` joined by ``+``. ``report --gaps`` reports instead, per
learner, what its out-of-fold evidence implies of its pool AUC less that AUC
(:func:`evidence_gaps`).

    python -m studies.wide_tables collect --suite dev --cells 600:0.5 --widen 100 \\
        --out results/wide/dev_widened
    python -m studies.wide_tables collect --suite user --tables decision --only wide-,700r \\
        --out results/wide/user
    python -m studies.wide_tables report results/wide/dev_widened \\
        --against model:0.6+logistic:0.2+bagged:0.2
    python -m studies.wide_tables report results/wide/user --gaps
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from puicl_model.estimator.learners import (
    BAGGED,
    BAGGED_BOOSTED,
    BOOSTED_BAGS_CHOSEN,
    CrossFittedLearner,
    log_odds,
)
from puicl_model.estimator.portfolio_rule import blended, standardizer, stronger_trees
from studies.portfolio_evidence import Task, chosen_tasks, fit_default, save_kept

# the blends report judges unless --blends names others: the fallback with the forests, with
# the boosted bags of a fit in their place, the boosted bags weighed as the model is there, the
# model alone and the boosted bags alone
BLENDS = ("model:0.6+logistic:0.2+bagged:0.2", "model:0.6+logistic:0.2+bb:0.2",
          "bb30:0.6+logistic:0.2+model:0.2", "model:1", "bb30:1")
MEMBERS_ALONE = ("model", "logistic", "bagged", "bb30")


def widened(task: Task, columns: int) -> Task:
    """``task`` with ``columns`` uninformative columns appended, keyed by its name."""
    rng = np.random.default_rng(zlib.crc32(task.name.encode()))
    noise = rng.normal(size=(len(task.s), columns))
    skewed = rng.random(columns) < 0.3
    noise[:, skewed] = np.exp(noise[:, skewed])
    table = (task.X.reset_index(drop=True) if isinstance(task.X, pd.DataFrame)
             else pd.DataFrame(task.X, columns=[f"c{j}" for j in range(task.X.shape[1])]))
    extra = pd.DataFrame(noise, columns=[f"noise{j:03d}" for j in range(columns)])
    return Task(task.name, task.group, pd.concat([table, extra], axis=1), task.s, task.y,
                task.seed)


def collect_task(make: Callable[[], Task], out: Path, widen: int) -> str:
    path = out / f"{make.name.replace('/', '__')}.npz"  # type: ignore[attr-defined]
    if path.exists():
        return f"{path} (kept)"
    task = make()
    if widen:
        task = widened(task, widen)
    clf, seconds = fit_default(task)
    portfolio = clf.fitted_.portfolio
    y_pool = task.y[task.s == 0]
    if portfolio is None or len(clf.fitted_pool_proba()) != len(y_pool):
        return f"{task.name}: skipped (no portfolio, or a sampled pool)"
    model = portfolio.member_pool_scores.get("model")
    if model is None or len(model) != len(y_pool):  # the blend did not weigh the model
        model = log_odds(clf.fitted_.model_scores(np.arange(len(y_pool)), clf._runtime()))
    arrays: dict[str, np.ndarray] = {
        "y_pool": y_pool, "default": clf.fitted_pool_proba(), "model": np.asarray(model),
        "groups": np.array(clf.fitted_.planners[0].n_feature_groups),
        "choice": np.array(portfolio.choice.name), "seconds": np.array(seconds)}
    for kind, scores in portfolio.pool_scores.items():
        arrays[kind], arrays[f"{kind}_labeled"] = scores, portfolio.labeled_scores[kind]
    for name, bags in (("bb", portfolio.bags(BAGGED_BOOSTED)), ("bb30", BOOSTED_BAGS_CHOSEN)):
        learner = CrossFittedLearner(BAGGED_BOOSTED, portfolio.entropy, n_threads=1)
        arrays[f"{name}_labeled"], arrays[name] = learner.fit(portfolio.x_labeled,
                                                              portfolio.x_pool, bags=bags)
    save_kept(path, arrays)
    return f"{task.name}: {int(arrays['groups'])} feature groups, {seconds:.1f} s"


def parse_blend(text: str) -> dict[str, float]:
    """``model:0.6+bb:0.4`` -> {"model": 0.6, "bb": 0.4}."""
    weights = {}
    for part in text.split("+"):
        member, colon, weight = part.partition(":")
        if not colon:
            raise ValueError(f"blend {text!r}: {part!r} is not member:weight")
        weights[member] = float(weight)
    return weights


def blend_auc(kept: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> float:
    """The pool AUC of the blend ``weights`` of the kept scores, as the portfolio blends."""
    from sklearn.metrics import roc_auc_score

    standard = {member: standardizer(np.asarray(kept[member], dtype=np.float64))
                for member in weights}
    return float(roc_auc_score(kept["y_pool"], blended(weights, kept, standard)))


def kept_tasks(folder: Path, only: str = "") -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Each kept task of ``folder`` whose name holds one of ``only``'s words (all: empty), by
    name, with its arrays."""
    for path in sorted(folder.glob("*.npz")):
        if not only or any(word in path.stem for word in only.split(",")):
            yield path.stem, dict(np.load(path))


def judged(folder: Path, blends: Sequence[str], against: str, only: str = "") -> pd.DataFrame:
    """Per kept task: the AUC of each blend, of ``against`` and of the best member alone."""
    from sklearn.metrics import roc_auc_score

    rows = []
    for name, kept in kept_tasks(folder, only):
        row: dict[str, object] = {"task": name, "groups": int(kept["groups"]),
                                  "default": roc_auc_score(kept["y_pool"], kept["default"])}
        for name in {against, *blends}:
            row[name] = blend_auc(kept, parse_blend(name))
        row["best_member"] = max(blend_auc(kept, {m: 1.0}) for m in MEMBERS_ALONE)
        # the boosted bags' own lead over the forests, as the fallback's tree test reads it
        row["trees_lead"] = stronger_trees(
            {BAGGED: kept["bagged_labeled"], BAGGED_BOOSTED: kept["bb_labeled"]},
            {BAGGED: kept["bagged"], BAGGED_BOOSTED: kept["bb"]})[1]
        rows.append(row)
    return pd.DataFrame(rows).set_index("task")


def evidence_gaps(folder: Path, only: str = "") -> pd.DataFrame:
    """Per kept task and learner: what its out-of-fold evidence says of its ranking of the pool,
    less what that ranking is. Under SCAR a score's AUC of labeled positives against the pool is
    ``π/2 + (1 − π) · AUC`` (π: the pool's share of positives, AUC: the score's true pool AUC),
    so the evidence implies ``(held − π/2) / (1 − π)``. A bag learner scores each labeled
    positive by the bags that left out its fold (one in LEARNER_FOLDS of them) and each pool
    row by every bag that did not draw it, so its evidence judges fewer bags than its pool
    scores average."""
    from sklearn.metrics import roc_auc_score

    from puicl_model.estimator.prior_report import held_out_auc

    rows = []
    for name, kept in kept_tasks(folder, only):
        y_pool = kept["y_pool"]
        pi = float(y_pool.mean())
        row: dict[str, object] = {"task": name}
        for learner in ("logistic", "bagged", "bb", "bb30"):
            labeled, pool = kept[f"{learner}_labeled"], kept[learner]
            held = held_out_auc([(labeled, pool)])
            row[learner] = (held - pi / 2) / (1 - pi) - roc_auc_score(y_pool, pool)
        rows.append(row)
    return pd.DataFrame(rows).set_index("task")


def summary(frame: pd.DataFrame, blends: Sequence[str], against: str) -> pd.DataFrame:
    lines = {}
    for name in ["default", *blends]:
        difference = frame[name] - frame[against]
        lines[name] = {
            "tasks": len(frame), "minus_against": difference.mean(),
            "se": difference.std(ddof=1) / np.sqrt(len(frame)),
            "above_0.01": int((difference > 0.01).sum()),
            "below_0.01": int((difference < -0.01).sum()),
            "within_0.01_of_best_member": int((frame[name] >= frame["best_member"] - 0.01).sum())}
    return pd.DataFrame(lines).T


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.wide_tables",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("collect", "report"))
    parser.add_argument("folder", nargs="?", type=Path, help="report: the kept scores")
    parser.add_argument("--out", type=Path, help="collect: where the kept scores go")
    parser.add_argument("--suite", choices=("user", "dev"), default="dev")
    parser.add_argument("--tables", default="decision", help="user: decision or unseen")
    parser.add_argument("--cells", default="600:0.5", help="dev: the size grid's cells")
    parser.add_argument("--only", default="", help="tasks whose name holds one of these")
    parser.add_argument("--widen", type=int, default=0, help="dev: uninformative columns added")
    parser.add_argument("--blends", default=",".join(BLENDS))
    parser.add_argument("--against", default=BLENDS[0])
    parser.add_argument("--per-task", action="store_true")
    parser.add_argument("--gaps", action="store_true",
                        help="report: each learner's evidence less its pool AUC instead")
    args = parser.parse_args(argv)
    if args.command == "collect":
        if args.out is None:
            parser.error("collect needs --out")
        for make in chosen_tasks(args.suite, args.tables, args.cells, args.only):
            print(collect_task(make, args.out, args.widen), flush=True)
        return 0
    if args.folder is None:
        parser.error("report needs the folder of kept scores")
    blends = [name for name in args.blends.split(",") if name]
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.float_format", "{:.4f}".format):
        if args.gaps:
            gaps = evidence_gaps(args.folder, args.only)
            if args.per_task:
                print(gaps)
            print(pd.DataFrame({"tasks": len(gaps), "mean": gaps.mean(),
                                "se": gaps.std(ddof=1) / np.sqrt(len(gaps))}))
            return 0
        frame = judged(args.folder, blends, args.against, args.only)
        if args.per_task:
            print(frame)
        print(summary(frame, blends, args.against))
    return 0


if __name__ == "__main__":
    sys.exit(main())
