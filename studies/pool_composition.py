"""How the model alone ranks a pool as its share of negatives falls (docs/recipe.md, "Training on
large tasks, and pools almost all positive").

For each development-suite table of at least ``--min-rows`` rows whose task with every row at
target π (``benchmark.protocol.make_task``, repetition 0) has a pool of fewer than ``--below``
negatives, sub-tasks of 300 labeled rows and 1,000 pool rows are drawn from that task, the pool's
negative share set with the true labels (a diagnosis, not a method): the task's own share, then
each of ``--shares``. Each sub-task is scored by the model alone (``portfolio="none"``) with each
``--weights``; AUC on the sub-task's pool, ``--draws`` draws each::

    python -m studies.pool_composition --out results/pool_composition.csv
    python -m studies.pool_composition --out results/pool_composition.csv \\
        --weights v11=puicl_model/net/weights --weights pi=runs/ft_pi/weights
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.size_diagnosis import rows_of

LABELED, POOL = 300, 1000


def draw_pool(rng: np.random.Generator, positives: np.ndarray, negatives: np.ndarray,
              share: float | None) -> np.ndarray:
    """``POOL`` pool rows: at random (``share`` None), or with ``share`` of them negatives
    (as many as there are, at most)."""
    if share is None:
        return rng.choice(np.r_[positives, negatives], POOL, replace=False)
    n_negative = min(round(POOL * share), len(negatives))
    return np.r_[rng.choice(positives, POOL - n_negative, replace=False),
                 rng.choice(negatives, n_negative, replace=False)]


def measure_table(slug: str, dataset: Any, task: Any, shares: list[float], draws: int,
                  weights: dict[str, Path | None]) -> list[dict]:
    """The sub-tasks of one table's every-row ``task`` (of ``dataset``)."""
    from sklearn.metrics import roc_auc_score

    from benchmark.methods.puicl import as_table
    from puicl_model import PUICLClassifier

    table = as_table(task.X, dataset.categorical)
    labeled, pool = np.flatnonzero(task.s == 1), np.flatnonzero(task.s == 0)
    positives, negatives = pool[task.y_true[pool] == 1], pool[task.y_true[pool] == 0]
    rows = []
    for share in [None, *shares]:
        for draw in range(draws):
            rng = np.random.default_rng(draw)
            chosen = np.r_[rng.choice(labeled, LABELED, replace=False),
                           draw_pool(rng, positives, negatives, share)]
            sub = rows_of(table, chosen)
            s = np.r_[np.ones(LABELED), np.zeros(POOL)]
            y_pool = task.y_true[chosen[LABELED:]]
            row = {"table": slug, "task_pi": task.pi, "draw": draw,
                   "pool_pi": float((y_pool == 0).mean()),
                   "share": "own" if share is None else share}
            for name, path in weights.items():
                clf = PUICLClassifier(weights=path, random_state=draw, n_threads=1,
                                      progress=False, portfolio="none").fit(sub, s)
                pool_rows = rows_of(sub, np.arange(LABELED, LABELED + POOL))
                row[name] = roc_auc_score(y_pool, clf.predict_proba(pool_rows)[:, 1])
            rows.append(row)
    return rows


def parse_weights(items: list[str] | None) -> dict[str, Path | None]:
    if not items:
        return {"bundled": None}
    named = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--weights takes NAME=DIR, got {item!r}")
        named[name] = Path(path)
    return named


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m studies.pool_composition")
    parser.add_argument("--out", type=Path, required=True, help="CSV of every sub-task")
    parser.add_argument("--pi", type=float, default=0.5, help="the tasks' target π")
    parser.add_argument("--below", type=float, default=0.15,
                        help="tables whose every-row pool has fewer negatives than this")
    parser.add_argument("--shares", default="0.1,0.2,0.5")
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--min-rows", type=int, default=4000)
    parser.add_argument("--weights", action="append", metavar="NAME=DIR",
                        help="weights to compare (repeatable; default: the bundled ones)")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    from benchmark.devsuite import load_devsuite_table, resolve_devsuite_dir
    from benchmark.protocol import EVERY_ROW, make_task

    torch.set_num_threads(1)
    weights = parse_weights(args.weights)
    shares = [float(x) for x in args.shares.split(",")]
    manifest = pd.read_csv(resolve_devsuite_dir(args.data_dir) / "manifest.csv")
    rows = []
    for slug in manifest.loc[manifest["rows"] >= args.min_rows, "slug"]:
        dataset = load_devsuite_table(slug, args.data_dir)
        task = make_task(dataset, 0, 0, max_positives=EVERY_ROW, target_pi=args.pi)
        if task.pi < args.below:
            rows += measure_table(slug, dataset, task, shares, args.draws, weights)
            print(f"pool_composition: {slug} done", file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    print(frame.groupby(["table", "share"], sort=False)[list(weights)].mean().round(3)
          .to_string())
    print(frame.groupby("share", sort=False)[list(weights)].mean().round(4).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
