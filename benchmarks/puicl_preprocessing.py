"""AUC of one PUICL checkpoint on benchmark tasks under different table preprocessings.

The figures of docs/model_card/v0.md ("The preprocessing defaults were chosen with the benchmark
in view", and the study subset) come from this script. Each variant is a
``PUICLClassifier(categorical=..., numeric=...)`` setting; categorical columns are declared to
the classifier as in ``puicl-bench`` (the loader's flags). Tasks, seeds and metric are the
benchmark's (paper §6.1, Mann–Whitney AUC on the unlabeled pool).

    python benchmarks/puicl_preprocessing.py --repeats 3                       # all datasets
    python benchmarks/puicl_preprocessing.py --datasets diabetes,heart --repeats 2 \\
        --weights runs/study/a_small_model_small_tasks/weights --variants ordinal/standard
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods.puicl import as_table
from benchmark.metrics import auc_mann_whitney
from benchmark.protocol import make_task, method_seed

VARIANTS = ("ordinal/standard", "ordinal/quantile", "onehot/quantile")


def replicate(slug: str, repetition: int, weights: str | None,
              variants: list[str]) -> list[dict]:
    import torch

    from puicl_model import PUICLClassifier

    torch.set_num_threads(1)
    task = make_task(load_dataset(slug), repetition, 0)
    unlabeled = task.s == 0
    table = as_table(task.X, task.categorical)
    rows = []
    for variant in variants:
        categorical, numeric = variant.split("/")
        clf = PUICLClassifier(weights=weights, categorical=categorical, numeric=numeric,
                              random_state=method_seed(0, slug, repetition, "puicl"),
                              n_threads=1, progress=False).fit(table, task.s)
        score = clf.predict_proba(table[unlabeled])[:, 1]
        rows.append({"dataset": slug, "repetition": repetition, "variant": variant,
                     "auc": auc_mann_whitney(task.y_true[unlabeled], score)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--weights", default=None, help="checkpoint (default: the bundled one)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated categorical/numeric settings")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    slugs = DATASET_SLUGS if args.datasets == "all" else args.datasets.split(",")
    variants = args.variants.split(",")
    results = Parallel(n_jobs=args.jobs)(
        delayed(replicate)(slug, rep, args.weights, variants)
        for slug in slugs for rep in range(args.repeats)
    )
    frame = pd.DataFrame([row for rows in results for row in rows])
    table = frame.pivot_table(index="dataset", columns="variant", values="auc")[variants]
    print(table.round(3).to_string())
    print("mean AUC:", {v: round(float(np.mean(frame.auc[frame.variant == v])), 4)
                        for v in variants})


if __name__ == "__main__":
    main()
