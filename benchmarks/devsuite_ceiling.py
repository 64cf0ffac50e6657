"""How much room the development suite leaves: supervised learners that see the pool's true
labels, on the suite's own PU tasks (docs/recipe.md, "How far the suite's tables can go").

For every table and target π, the task is the one ``puicl-bench --suite dev`` builds (same
seed, repetition, labeled positives and pool). A PU method sees only which rows are labeled;
here a supervised classifier is given the pool's hidden labels instead, and each pool row is
scored by a model fitted on the other four fifths of the pool (5-fold cross-fitting). Its pool
AUC is no PU method's target: it uses the labels PU learning lacks. It bounds, roughly, what a
table's features can say about its label at the pool's size, so a table where PUICL is already
near it has little left to gain from any change of the model or its prior.

    python benchmarks/devsuite_ceiling.py --out ceiling.csv [--repetitions 1]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.devsuite import devsuite_slugs, load_devsuite_table  # noqa: E402
from benchmark.protocol import make_task  # noqa: E402

PIS = (0.2, 0.5, 0.8)


def learners() -> dict[str, object]:
    """Two supervised references of opposite bias: boosted trees and a linear model."""
    return {
        "gbdt": HistGradientBoostingClassifier(max_iter=200, random_state=0),
        "logistic": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
    }


def pool_aucs(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Each learner's AUC on the pool, every row scored by a fit on the other folds."""
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    aucs = {}
    for name, model in learners().items():
        scores = cross_val_predict(model, x, y, cv=folds, method="predict_proba")[:, 1]
        aucs[name] = float(roc_auc_score(y, scores))
    return aucs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="per-task CSV to write")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="puicl-bench's root seed")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    rows = []
    for slug in devsuite_slugs():
        table = load_devsuite_table(slug)
        for repetition in range(args.repetitions):
            for pi in PIS:
                task = make_task(table, repetition, args.seed, target_pi=pi)
                pool = task.s == 0
                y = task.y_true[pool]
                # missing values as 0 (a few tables have gaps; both learners need numbers)
                x = np.nan_to_num(task.X[pool].astype(np.float64))
                rows.append({"dataset": slug, "repetition": repetition, "pi_target": pi,
                             **pool_aucs(x, y)})
        print(f"{slug}: done", file=sys.stderr)
    frame = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    frame["best"] = frame[["gbdt", "logistic"]].max(axis=1)
    print(frame.groupby("pi_target")[["gbdt", "logistic", "best"]].mean().round(4).to_string())
    print(frame[["gbdt", "logistic", "best"]].mean().round(4).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
