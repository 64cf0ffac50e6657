"""The model alone on a large pool through one shared context instead of random chunks
(docs/recipe.md, "Training on large tasks, and pools almost all positive").

With ``large_pool="chunks"`` a pool larger than one pass is cut into random chunks, each scored
next to its own random subset of the labeled rows, so each chunk is ranked against its own
context. Here every pool row is ranked against the same context: ``--labeled`` labeled rows
and ``--context`` pool rows are fitted as one task, and every other pool row is scored as a
new row of it (the query path: it attends to the context, nothing attends to it). The
context's pool rows are drawn

* ``random``: at random;
* ``enriched``: half of them from the third of the pool that a logistic regression of the
  labeled rows against the pool (the portfolio's learner, cross-fitted) ranks least positive,
  the rest at random. Where a pool is almost all positives, this gives the context more of the
  negatives the model needs to see (studies/pool_composition.py).

With ``--contexts K``, each draw scores the pool against K such contexts, each with its own
labeled rows (disjoint while there are enough), and averages the K probabilities: more of the
labeled rows are used.

For each development-suite table of at least ``--min-rows`` rows, the task with every row at
target π (``benchmark.protocol.make_task``, repetition 0; ``--max-positives`` caps its
positives as the size grid does); AUC on the whole pool, ``--draws`` draws of the context
each::

    python -m studies.shared_context --out results/shared_context.csv --pi 0.5
    python -m studies.shared_context --out results/shared_context_k4.csv --pi 0.5 --contexts 4
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from studies.size_diagnosis import rows_of

KINDS = ("random", "enriched")


def context_rows(kind: str, rng: np.random.Generator, n_pool: int, size: int,
                 least_positive: np.ndarray) -> np.ndarray:
    """``size`` pool positions for the context (``least_positive``: positions ordered by the
    first score, least positive first). The study's own draw, kept so that the figures of
    docs/recipe.md reproduce; the classifier's default (``large_pool="shared"``) draws its
    context by the same rule with its own seed keys, ``PassPlanner.context_rows``."""
    if kind == "random":
        return rng.choice(n_pool, size, replace=False)
    low = rng.choice(least_positive[: max(n_pool // 3, size // 2)], size // 2, replace=False)
    rest = np.setdiff1d(np.arange(n_pool), low)
    return np.r_[low, rng.choice(rest, size - len(low), replace=False)]


def measure_table(slug: str, pi: float, max_positives: int, draws: int, n_labeled: int,
                  size: int,
                  contexts: int, weights: Path | None, kinds: list[str],
                  data_dir: Path | None) -> list[dict]:
    from sklearn.metrics import roc_auc_score

    from benchmark.devsuite import load_devsuite_table
    from benchmark.methods.puicl import as_table
    from benchmark.protocol import EVERY_ROW, make_task
    from puicl_model import PUICLClassifier
    from puicl_model.estimator.portfolio import LOGISTIC, CrossFittedLearner
    from puicl_model.estimator.preprocessing import TablePreprocessor

    dataset = load_devsuite_table(slug, data_dir)
    task = make_task(dataset, 0, 0, max_positives=max_positives or EVERY_ROW, target_pi=pi)
    table = as_table(task.X, dataset.categorical)
    labeled, pool = np.flatnonzero(task.s == 1), np.flatnonzero(task.s == 0)
    y_pool = task.y_true[pool]
    encoded = TablePreprocessor().fit_transform(table, labeled=task.s == 1)
    _, first = CrossFittedLearner(LOGISTIC, 0).fit(encoded[labeled], encoded[pool])
    least_positive = np.argsort(first, kind="stable")
    rows = [{"table": slug, "pi": task.pi, "labeled": len(labeled), "pool": len(pool),
             "kind": "logistic", "draw": 0, "context_pi": np.nan,
             "auc": roc_auc_score(y_pool, first), "seconds": np.nan}]
    n_labeled = min(n_labeled, len(labeled))
    for kind in kinds:
        for draw in range(draws):
            rng = np.random.default_rng([draw, KINDS.index(kind)])
            scores, negatives, start = np.zeros(len(pool)), [], time.perf_counter()
            unused = labeled
            for _ in range(contexts):
                # each context's labeled rows: disjoint from the others' while enough are left
                if len(unused) < n_labeled:
                    unused = labeled
                chosen_l = rng.choice(unused, n_labeled, replace=False)
                unused = np.setdiff1d(unused, chosen_l)
                context = context_rows(kind, rng, len(pool), min(size, len(pool)),
                                       least_positive)
                negatives.append(float((y_pool[context] == 0).mean()))
                clf = PUICLClassifier(weights=weights, random_state=draw, n_threads=1,
                                      progress=False, portfolio="none").fit(
                    rows_of(table, np.r_[chosen_l, pool[context]]),
                    np.r_[np.ones(len(chosen_l)), np.zeros(len(context))])
                scores += clf.predict_proba(rows_of(table, pool))[:, 1] / contexts
            rows.append({"table": slug, "pi": task.pi, "labeled": len(labeled),
                         "pool": len(pool), "kind": kind, "draw": draw,
                         "context_pi": float(np.mean(negatives)),
                         "auc": roc_auc_score(y_pool, scores),
                         "seconds": time.perf_counter() - start})
    return rows


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m studies.shared_context")
    parser.add_argument("--out", type=Path, required=True, help="CSV of every measurement")
    parser.add_argument("--pi", type=float, default=0.5, help="the tasks' target π")
    parser.add_argument("--max-positives", type=int, default=None,
                        help="cap on a task's positives, as the size grid's (default: every row)")
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--labeled", type=int, default=300, help="labeled rows in the context")
    parser.add_argument("--context", type=int, default=1000, help="pool rows in the context")
    parser.add_argument("--contexts", type=int, default=1,
                        help="contexts per draw, their scores averaged (each its own labeled "
                        "rows, disjoint while there are enough)")
    parser.add_argument("--weights", type=Path, default=None, help="default: the bundled")
    parser.add_argument("--kinds", default=",".join(KINDS), help="contexts to measure")
    parser.add_argument("--min-rows", type=int, default=4000)
    parser.add_argument("--datasets", default=None, help="comma-separated tables (default: all "
                        "of at least --min-rows rows)")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    from benchmark.devsuite import resolve_devsuite_dir

    kinds = args.kinds.split(",")
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds takes {', '.join(KINDS)}, got {args.kinds!r}")
    torch.set_num_threads(1)
    manifest = pd.read_csv(resolve_devsuite_dir(args.data_dir) / "manifest.csv")
    slugs = (args.datasets.split(",") if args.datasets
             else list(manifest.loc[manifest["rows"] >= args.min_rows, "slug"]))
    rows = []
    for slug in slugs:
        rows += measure_table(slug, args.pi, args.max_positives, args.draws, args.labeled,
                              args.context,
                              args.contexts, args.weights, kinds,
                              args.data_dir)
        print(f"shared_context: {slug} done", file=sys.stderr, flush=True)
        frame = pd.DataFrame(rows)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False)  # after every table: a stopped run keeps its rows
    print(frame.pivot_table(index="table", columns="kind", values="auc").round(3).to_string())
    print(frame.groupby("kind")["auc"].mean().round(4).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
