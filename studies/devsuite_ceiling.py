"""How much room the development suite leaves: supervised learners that see the pool's true
labels, on the suite's own PU tasks (docs/recipe.md, "How far the suite's tables can go"), and
how close to π a class-prior estimator that relies on a pure-positive score range can come on
them (docs/recipe.md, "How far the suite's tables can go").

For every table and target π, the task is the one ``puicl-bench --suite dev`` builds (same
seed, repetition, labeled positives and pool). A PU method sees only which rows are labeled;
here a supervised classifier is given the pool's hidden labels instead, and each pool row is
scored by a model fitted on the other four fifths of the pool (5-fold cross-fitting). Its pool
AUC is no PU method's target: it uses the labels PU learning lacks. It bounds, roughly, what a
table's features can say about its label at the pool's size, so a table where PUICL is already
near it has little left to gain from any change of the model or its prior.

The same scores bound π̂. BBE, DEDPUL and the other estimators of the PU literature assume
irreducibility: some score range holds positives only. With the pool's positive share
α = 1 − π, the share of the pool above a cut t is α·P⁺(t) + π·P⁻(t) (P⁺, P⁻: the shares of the
pool's positives and negatives above t), so the best such an estimator can return, even knowing
the positives' score law exactly, is 1 − min_t [α·P⁺(t) + π·P⁻(t)] / P⁺(t), which falls short
of π by π · min_t P⁻(t) / P⁺(t). That shortfall is written per task (``pi_gap_<learner>``), the
minimum taken over the cuts with at least ``--top-share`` of the positives above them (a cut
with a handful of positives above it is noise, not a law). A PU method's scores separate the
classes less than these supervised ones, so its shortfall can only be larger.

    python -m studies.devsuite_ceiling --out ceiling.csv [--repetitions 1] [--top-share 0.1]

``--shards DIR`` measures the same on the pools of stored prior tasks instead (the first step
of every ``--every``-th stored stage of ``--split``, and the tail): whether the prior's tasks are
as hard for a supervised learner as the suite's tables (docs/recipe.md, "Prior v2").

    python -m studies.devsuite_ceiling --out prior.csv --shards runs/prior_study/shards/HASH
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.protocol import make_task

PIS = (0.2, 0.5, 0.8)


def learners() -> dict[str, object]:
    """Two supervised references of opposite bias: boosted trees and a linear model."""
    return {
        "gbdt": HistGradientBoostingClassifier(max_iter=200, random_state=0),
        "logistic": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
    }


def irreducibility_gap(scores: np.ndarray, y: np.ndarray, top_share: float) -> float:
    """π · min_t P⁻(t) / P⁺(t) over the cuts t with at least ``top_share`` of the positives
    above them: how far below π an estimator that takes the top scores for pure positives
    falls, given the positives' score law exactly (the module's docstring)."""
    if not 0.0 < top_share <= 1.0:
        raise ValueError(f"top_share must be in (0, 1], got {top_share}")
    order = np.argsort(-scores, kind="stable")
    labels, ranked = y[order], scores[order]
    positives_above = np.cumsum(labels) / labels.sum()
    negatives_above = np.cumsum(1 - labels) / (1 - labels).sum()
    # a cut falls between two different scores: tied rows are above or below it together
    is_cut = np.append(ranked[1:] != ranked[:-1], True)
    enough = is_cut & (positives_above >= top_share)
    pi = float(1.0 - y.mean())
    return pi * float(np.min(negatives_above[enough] / positives_above[enough]))


def pool_scores(x: np.ndarray, y: np.ndarray, top_share: float) -> dict[str, float]:
    """Each learner's AUC on the pool, every row scored by a fit on the other folds, and the
    irreducibility gap of those scores."""
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    out = {}
    for name, model in learners().items():
        scores = cross_val_predict(model, x, y, cv=folds, method="predict_proba")[:, 1]
        out[name] = float(roc_auc_score(y, scores))
        out[f"pi_gap_{name}"] = irreducibility_gap(scores, y, top_share)
    return out


def prior_rows(directory: Path, split: str, every: int, top_share: float) -> list[dict]:
    """One row per stored prior task of the chosen steps: its pool's supervised references."""
    from prior_gen.shards import open_shards

    rows = []
    with open_shards(directory, split) as reader:
        stages = reader.stages()
        chosen = [s for i, s in enumerate(stages) if i % every == 0 or s == stages[-1]]
        for stage in chosen:
            step = reader.available_steps(stage)[0]
            for index, task in enumerate(reader.read_step(stage, step)):
                y = task.y[task.n_labeled:].astype(np.int64)
                if min(np.count_nonzero(y), np.count_nonzero(y == 0)) < 5:
                    continue  # too few of a class for 5 stratified folds
                x = task.x[task.n_labeled:].astype(np.float64)
                rows.append({"stage": str(stage), "step": step, "index": index,
                             "n_pool": int(y.shape[0]), "pi": float(1.0 - y.mean()),
                             **pool_scores(x, y, top_share)})
            print(f"stage {stage}: done", file=sys.stderr)
    return rows


def suite_rows(repetitions: int, seed: int, top_share: float) -> list[dict]:
    """One row per development-suite task: its pool's supervised references."""
    rows = []
    for slug in devsuite_slugs():
        table = load_devsuite_table(slug)
        for repetition in range(repetitions):
            for pi in PIS:
                task = make_task(table, repetition, seed, target_pi=pi)
                pool = task.s == 0
                y = task.y_true[pool]
                # missing values as 0 (a few tables have gaps; both learners need numbers)
                x = np.nan_to_num(task.X[pool].astype(np.float64))
                rows.append({"dataset": slug, "repetition": repetition, "pi_target": pi,
                             "pi": float(1.0 - y.mean()), **pool_scores(x, y, top_share)})
        print(f"{slug}: done", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="per-task CSV to write")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="puicl-bench's root seed")
    parser.add_argument("--top-share", type=float, default=0.1,
                        help="least share of the positives above a cut for the π bound")
    parser.add_argument("--shards", type=Path, metavar="DIR",
                        help="stored prior tasks instead of the development suite")
    parser.add_argument("--split", default="train", choices=("train", "val"))
    parser.add_argument("--every", type=int, default=10,
                        help="with --shards: every N-th stored stage (and the tail)")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every must be >= 1, got {args.every}")
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.shards is not None:
        rows = prior_rows(args.shards, args.split, args.every, args.top_share)
    else:
        rows = suite_rows(args.repetitions, args.seed, args.top_share)
    frame = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    frame["best"] = frame[["gbdt", "logistic"]].max(axis=1)
    columns = ["gbdt", "logistic", "best", "pi", "pi_gap_gbdt", "pi_gap_logistic"]
    if "pi_target" in frame:
        print(frame.groupby("pi_target")[columns].mean().round(4).to_string())
    print(frame[columns].mean().round(4).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
