"""Why the model alone stays flat as tasks grow: three measurements on the development suite's
largest tables (docs/dev_suite.md, "Why the model alone stays flat").

For each table with at least ``--min-rows`` rows, the task with every row at target π
(``benchmark.protocol.make_task``, repetition 0) is built, and from it:

1. **A bounded view.** Sub-tasks of L labeled rows and U pool rows drawn from that task (three
   draws each): the model alone against the logistic regression of labeled against unlabeled
   rows on the same encoding (the portfolio's logistic learner,
   :mod:`puicl_model.estimator.portfolio`), at 200 × 800 (the trained range), 300 × 1,000 (one pass
   of a chunked pool) and
   1,000 × 4,000 (chunked into such passes). AUC on the sub-task's pool.
2. **Whether pool rows inform each other within a pass.** At 300 × 1,000, the pool scored in
   one transductive pass (every pool row attends to every other) against the same rows scored
   as query rows next to the labeled rows and a pool of only 20 rows (each attends to the
   context and itself, no other pool row).
3. **π̂ and the 0.5 cut on large pools** are read from the size grid's results
   (``benchmark.size_grid``): π̂'s error and the accuracy of the 0.5 cut per cap.

Usage::

    python -m studies.size_diagnosis --out results/size_diagnosis.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SIZES = ((200, 800), (300, 1000), (1000, 4000))
DRAWS = 3


def _logistic_auc(x: np.ndarray, n_labeled: int, y_pool: np.ndarray, seed: int) -> float:
    from sklearn.metrics import roc_auc_score

    from puicl_model.estimator.portfolio import LOGISTIC, CrossFittedLearner

    _, pool_scores = CrossFittedLearner(LOGISTIC, seed).fit(x[:n_labeled], x[n_labeled:])
    return float(roc_auc_score(y_pool, pool_scores))


def rows_of(table, index: np.ndarray):
    return table.iloc[index] if hasattr(table, "iloc") else table[index]


def measure_table(slug: str, pi: float, data_dir: Path | None) -> list[dict]:
    from sklearn.metrics import roc_auc_score

    from benchmark.devsuite import load_devsuite_table
    from benchmark.methods.puicl import as_table
    from benchmark.protocol import EVERY_ROW, make_task
    from puicl_model import PUICLClassifier

    dataset = load_devsuite_table(slug, data_dir)
    task = make_task(dataset, 0, 0, max_positives=EVERY_ROW, target_pi=pi)
    labeled, pool = np.flatnonzero(task.s == 1), np.flatnonzero(task.s == 0)
    table = as_table(task.X, dataset.categorical)
    rows = []
    for n_l, n_u in SIZES:
        for draw in range(DRAWS):
            rng = np.random.default_rng(draw)
            chosen_l = rng.choice(labeled, min(n_l, len(labeled)), replace=False)
            chosen_u = rng.choice(pool, min(n_u, len(pool)), replace=False)
            s = np.r_[np.ones(len(chosen_l)), np.zeros(len(chosen_u))]
            sub = rows_of(table, np.r_[chosen_l, chosen_u])
            clf = PUICLClassifier(random_state=draw, n_threads=1, progress=False,
                                  portfolio="none").fit(sub, s)
            y_u = task.y_true[chosen_u]
            row = {"table": slug, "pi": task.pi, "labeled": len(chosen_l),
                   "pool": len(chosen_u), "draw": draw,
                   "model": roc_auc_score(y_u, clf.predict_proba(rows_of(table, chosen_u))[:, 1]),
                   "logistic": _logistic_auc(np.vstack([clf.views_[0].x_labeled,
                                                        clf.views_[0].x_pool]),
                                             len(chosen_l), y_u, draw)}
            if (n_l, n_u) == (300, 1000):
                alone = PUICLClassifier(random_state=draw, n_threads=1, progress=False,
                                        portfolio="none").fit(sub.iloc[:len(chosen_l) + 20]
                                                            if hasattr(sub, "iloc")
                                                            else sub[:len(chosen_l) + 20],
                                                            s[:len(chosen_l) + 20])
                queries = rows_of(table, chosen_u[20:])
                row["model_pool_of_20"] = roc_auc_score(
                    y_u[20:], alone.predict_proba(queries)[:, 1])
                row["model_same_rows"] = roc_auc_score(
                    y_u[20:], clf.predict_proba(queries)[:, 1])
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m studies.size_diagnosis")
    parser.add_argument("--out", type=Path, required=True, help="CSV of every measurement")
    parser.add_argument("--pi", type=float, default=0.5)
    parser.add_argument("--min-rows", type=int, default=4000)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    from benchmark.devsuite import resolve_devsuite_dir

    torch.set_num_threads(1)
    manifest = pd.read_csv(resolve_devsuite_dir(args.data_dir) / "manifest.csv")
    slugs = list(manifest.loc[manifest["rows"] >= args.min_rows, "slug"])
    rows = []
    for slug in slugs:
        rows += measure_table(slug, args.pi, args.data_dir)
        print(f"size_diagnosis: {slug} done", file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    means = frame.groupby(["labeled"])[["model", "logistic"]].mean()
    print(means.round(4).to_string())
    both = frame.dropna(subset=["model_pool_of_20"])
    print(f"300 x 1000: pool in one pass {both['model_same_rows'].mean():.4f}, "
          f"scored next to 20 pool rows {both['model_pool_of_20'].mean():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
