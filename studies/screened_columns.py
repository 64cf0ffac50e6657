"""The model alone on every column of a wide table against the model alone on the columns an
F test of labeled against unlabeled rows ranks highest, per task, on either yardstick.

A pass sees at most ``max_features`` (20) features, so a wider table is split at random into
feature groups whose scores are averaged: with 15 informative columns among 150, each group holds
one or two of them. Screening keeps the ``--keep`` columns whose means differ most between the
labeled rows and the pool (under SCAR, the informative ones, as far as the pool's positives let
them show), so one group holds them all. Both arms read the learners' encoding of the table
(``learner_encoding``: one-hot categories, standardized numbers), and tables of at most
``--keep`` such columns are skipped.

    python -m studies.screened_columns --suite user --only wide-linear-3000r,wide-threshold-700r
    python -m studies.screened_columns --suite dev --cells 600:0.5,600:0.2
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.metrics import roc_auc_score

from puicl_model.estimator.learners import encoded_table
from studies.portfolio_evidence import chosen_tasks


def screened(x: np.ndarray, labeled: np.ndarray, keep: int) -> np.ndarray:
    """The ``keep`` columns of ``x`` (sorted) of the largest F statistic of ``labeled``
    against the other rows."""
    from sklearn.feature_selection import f_classif

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        statistic = np.nan_to_num(f_classif(x, labeled)[0], nan=0.0)
    return np.sort(np.argsort(-statistic, kind="stable")[:keep])


def model_auc(x: np.ndarray, s: np.ndarray, y_pool: np.ndarray, seed: int) -> float:
    """The pool AUC of the model alone (the bundled weights, one thread) fitted on ``x``."""
    from puicl_model import PUICLClassifier

    clf = PUICLClassifier(random_state=seed, n_threads=1, progress=False,
                          portfolio="none").fit(x, s)
    return float(roc_auc_score(y_pool, clf.predict_proba(x[s == 0])[:, 1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.screened_columns",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("user", "dev"), required=True)
    parser.add_argument("--tables", default="decision", help="user: decision or unseen")
    parser.add_argument("--cells", default="600:0.5", help="dev: the size grid's cells")
    parser.add_argument("--only", default="", help="tasks whose name holds one of these")
    parser.add_argument("--keep", type=int, default=20, help="the columns screening keeps")
    args = parser.parse_args(argv)
    tasks = chosen_tasks(args.suite, args.tables, args.cells, args.only)
    differences: dict[str, list[float]] = {}
    for make in tasks:
        task = make()
        x = encoded_table(task.X, task.s == 1)[1]
        if x.shape[1] <= args.keep:
            continue
        y_pool = task.y[task.s == 0]
        every = model_auc(x, task.s, y_pool, task.seed)
        kept = model_auc(x[:, screened(x, task.s == 1, args.keep)], task.s, y_pool, task.seed)
        differences.setdefault(task.group, []).append(kept - every)
        print(f"{task.name:50s} {x.shape[1]:4d} columns: every {every:.4f}, "
              f"screened {kept:.4f} ({kept - every:+.4f})", flush=True)
    for group, values in differences.items():
        d = np.array(values)
        se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
        print(f"{group}: {len(d)} tasks, screened − every {d.mean():+.4f} ± {se:.4f}, "
              f"{int((d < -0.01).sum())} more than 0.01 lower")
    return 0


if __name__ == "__main__":
    sys.exit(main())
