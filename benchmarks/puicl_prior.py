"""Class-prior estimates of one PUICL checkpoint on benchmark tasks at several pool shares π.

The π̂ table of docs/classifier.md comes from this script. For each task of ``puicl-bench
--pi P`` (same tasks and seeds) it fits ``PUICLClassifier`` as the benchmark adapter does and
records the error |π̂ − π| of three estimates: the mean of P(y=0) over the pool (the estimate
before issue 17), Best Bin Estimation on the model's scores of held-out labeled positives, and
``estimate_class_prior()``, the larger of the two.

    python benchmarks/puicl_prior.py --pis 0.2,0.5,0.8 --repeats 2 --jobs 2
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods.puicl import as_table
from benchmark.protocol import make_task, method_seed


def replicate(slug: str, repetition: int, pi: float) -> dict:
    import torch

    from puicl_model import PUICLClassifier
    from puicl_model.prior import best_bin_alpha

    torch.set_num_threads(1)
    task = make_task(load_dataset(slug), repetition, 0, target_pi=pi)
    clf = PUICLClassifier(random_state=method_seed(0, slug, repetition, "puicl"),
                          n_threads=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dropped constant columns
        clf.fit(as_table(task.X, task.categorical), task.s.astype(np.int8))
    mean = float(np.mean(1.0 - clf._pool_probabilities()))
    best_bin = float(np.mean([1.0 - best_bin_alpha(held, pool)
                              for held, pool in clf._held_out_scores()]))
    return {"dataset": slug, "repetition": repetition, "target_pi": pi, "pi": task.pi,
            "mean": abs(mean - task.pi), "best_bin": abs(best_bin - task.pi),
            "estimate_class_prior": abs(clf.estimate_class_prior() - task.pi)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pis", default="0.2,0.5,0.8")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    slugs = DATASET_SLUGS if args.datasets == "all" else tuple(args.datasets.split(","))
    jobs = [(slug, rep, float(pi)) for pi in args.pis.split(",") for slug in slugs
            for rep in range(args.repeats)]
    rows = Parallel(n_jobs=args.jobs)(delayed(replicate)(*job) for job in jobs)
    frame = pd.DataFrame(rows)
    table = frame.groupby("target_pi")[["mean", "best_bin", "estimate_class_prior"]].mean()
    table.insert(0, "tasks", frame.groupby("target_pi").size())
    print("mean |π̂ − π| per target π:")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
