"""What an exact affine copy of a column does to PUICL on the development suite, and whether
``affine_copies="drop"`` undoes it (docs/classifier.md, "Affine copies of a column").

The suite's own tables hold no exact affine copy, so ``affine_copies`` changes nothing there.
This script gives every table one: each task of ``puicl-bench --suite dev`` (same tables,
repetitions, π and seeds) gets the column ``1.8 · x + 32`` appended, ``x`` being the table's
first numeric column with more than two values (tables without one are left out), and PUICL
scores it with ``affine_copies`` ``keep`` or ``drop`` and the other settings of
``--method-config``. With ``drop`` the copy is removed, so its AUCs are those of the
unmodified task (up to the float rounding of the column order); with ``keep`` they say what the
copy costs. Compare with ``devsuite_table.py``-style pairing by table:

    python benchmarks/devsuite_injected_copies.py --affine-copies keep --out keep.csv
    python benchmarks/devsuite_injected_copies.py --affine-copies drop --out drop.csv
    python benchmarks/devsuite_injected_copies.py --compare keep.csv drop.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.protocol import PUTask, make_task, method_seed
from benchmark.runner import evaluate_replicate
from benchmark.summary import paired_difference
from puicl_common.atomic import atomic_write_text

PIS = (0.2, 0.5, 0.8)


def with_affine_copy(task: PUTask) -> PUTask | None:
    """The task with ``1.8 · x + 32`` of its first numeric column of more than two values
    appended, or None when it has no such column."""
    for j, is_categorical in enumerate(task.categorical):
        column = task.X[:, j]
        if not is_categorical and len(np.unique(column[~np.isnan(column)])) > 2:
            x = np.hstack([task.X, 1.8 * task.X[:, [j]] + 32.0])
            return dataclasses.replace(task, X=x, categorical=(*task.categorical, False))
    return None


def score(mode: str, repetitions: int, seed: int, weights: Path | None,
          settings: dict) -> pd.DataFrame:
    rows = []
    for slug in devsuite_slugs():
        table = load_devsuite_table(slug)
        for repetition in range(repetitions):
            for pi in PIS:
                task = with_affine_copy(make_task(table, repetition, seed, target_pi=pi))
                if task is None:
                    continue
                record = evaluate_replicate(task, "puicl", method_seed(seed, slug, repetition,
                                                                       "puicl"),
                                            weights, {**settings, "affine_copies": mode})
                rows.append({"dataset": slug, "repetition": repetition, "pi_target": pi,
                             "auc": record["auc"]})
        print(f"{slug}: done", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def compare(first: Path, second: Path) -> None:
    """The paired mean AUC difference (first − second) per π and over the suite, ± the standard
    error across tables of each table's mean difference."""
    runs = pd.concat([pd.read_csv(first).assign(method="first"),
                      pd.read_csv(second).assign(method="second")])
    by_pi = runs.pivot_table(index="pi_target", columns="method", values="auc")
    for pi, row in by_pi.iterrows():
        print(f"π = {pi}: Δ AUC {row['first'] - row['second']:+.4f}")
    mean, error = paired_difference(runs, "first", "second")
    print(f"suite ({runs.dataset.nunique()} tables): Δ AUC {mean:+.4f} ± {error:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--affine-copies", choices=("keep", "drop"))
    parser.add_argument("--out", type=Path, help="per-task CSV to write")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="puicl-bench's root seed")
    parser.add_argument("--weights", type=Path, help="PUICL weights (default: bundled)")
    parser.add_argument("--n-estimators", type=int, default=1,
                        help="ensemble members (default 1: the single pass)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="rows per chunk of pools above single_pass_limit (default: the "
                        "classifier's)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("FIRST", "SECOND"),
                        help="print the paired difference of two --out files and exit")
    args = parser.parse_args(argv)
    if args.compare:
        compare(*args.compare)
        return 0
    if args.affine_copies is None or args.out is None:
        parser.error("--affine-copies and --out are required unless --compare is given")
    warnings.filterwarnings("ignore", category=UserWarning)
    frame = score(args.affine_copies, args.repetitions, args.seed, args.weights,
                  {"n_estimators": args.n_estimators,
                   **({} if args.chunk_size is None else {"chunk_size": args.chunk_size})})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, frame.to_csv(index=False))
    print(frame.groupby("pi_target").auc.mean().round(4).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
