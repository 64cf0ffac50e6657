"""Class-prior estimates of one PUICL checkpoint on benchmark tasks at several pool shares π.

The π̂ table of docs/classifier.md comes from this script. For each task of ``puicl-bench
--pi P`` (same tasks and seeds) it fits ``PUICLClassifier`` as the benchmark adapter does and
records several estimates of π, the pool's negative share, next to the realized π and the
task's AUC:

* ``mean``: the mean of P(y=0) over the pool (the estimate before issue 17);
* ``best_bin``: Best Bin Estimation on the model's scores of held-out labeled positives
  (``puicl_model.prior``), averaged over the two halves;
* ``estimate_class_prior``: what the classifier returns, the larger of the two;
* ``symmetric``: the pool's mean P(y=1), m_U = α m_P + (1 − α) m_N, solved for α with the
  held-out positives' mean m_P and the assumption m_N = 1 − m_P (the model is as unsure of
  negatives as of positives), per half; the mean where m_P < 0.55 (no signal to invert);
* ``prior_shift_em``: the EM re-estimate of a class prior under prior shift (Saerens, Latinne
  & Decaestecker, Neural Computation 2002), reading the pool's P(y=1) as posteriors under the
  synthetic prior's mean positive share, 0.5.

    python benchmarks/puicl_prior.py --pis 0.2,0.5,0.8 --repeats 2 --jobs 2 --out prior.csv

The table printed is the mean |π̂ − π| of each estimate per target π; ``--out`` keeps every
task's signed estimates, so that other rules can be compared without scoring again.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.metrics import roc_auc_score

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods.puicl import as_table
from benchmark.protocol import make_task, method_seed

ESTIMATES = ("mean", "best_bin", "estimate_class_prior", "symmetric", "prior_shift_em")
MIN_HELD_OUT_MEAN = 0.55  # below it the held-out positives' mean says too little to invert
SYNTHETIC_POSITIVE_SHARE = 0.5  # the prior's mean positive share of a pool (final stages)


def symmetric_alpha(held: np.ndarray, pool: np.ndarray) -> float | None:
    """α from m_U = α m_P + (1 − α)(1 − m_P); None where m_P is too close to 0.5."""
    m_p, m_u = float(np.mean(held)), float(np.mean(pool))
    if m_p < MIN_HELD_OUT_MEAN:
        return None
    return float(np.clip((m_u + m_p - 1.0) / (2.0 * m_p - 1.0), 0.0, 1.0))


def prior_shift_alpha(posteriors: np.ndarray, trained_alpha: float = SYNTHETIC_POSITIVE_SHARE,
                      iterations: int = 1000, tolerance: float = 1e-8) -> float:
    """Saerens et al.'s EM: rescale the posteriors to a new prior α until α is their mean."""
    q = np.clip(np.asarray(posteriors, dtype=np.float64), 1e-6, 1 - 1e-6)
    alpha = float(np.mean(q))
    for _ in range(iterations):
        up = alpha / trained_alpha * q
        down = (1.0 - alpha) / (1.0 - trained_alpha) * (1.0 - q)
        new = float(np.mean(up / (up + down)))
        if abs(new - alpha) < tolerance:
            return new
        alpha = new
    return alpha


def replicate(slug: str, repetition: int, pi: float, weights: str | None) -> dict:
    import torch

    from puicl_model import PUICLClassifier
    from puicl_model.prior import best_bin_alpha

    torch.set_num_threads(1)
    task = make_task(load_dataset(slug), repetition, 0, target_pi=pi)
    clf = PUICLClassifier(weights, random_state=method_seed(0, slug, repetition, "puicl"),
                          n_threads=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dropped constant columns
        clf.fit(as_table(task.X, task.categorical), task.s.astype(np.int8))
    pool = clf._pool_probabilities()
    halves = clf._held_out_scores()
    mean = float(np.mean(1.0 - pool))
    symmetric = [symmetric_alpha(held, pool_half) for held, pool_half in halves]
    y_pool = task.y_true[task.s == 0]
    return {
        "dataset": slug, "repetition": repetition, "target_pi": pi, "pi": task.pi,
        "auc": float(roc_auc_score(y_pool, pool)) if 0 < y_pool.sum() < len(y_pool) else None,
        "mean": mean,
        "best_bin": float(np.mean([1.0 - best_bin_alpha(held, pool_half)
                                   for held, pool_half in halves])),
        "estimate_class_prior": clf.estimate_class_prior(),
        "symmetric": mean if None in symmetric else 1.0 - float(np.mean(symmetric)),
        "prior_shift_em": 1.0 - prior_shift_alpha(pool),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pis", default="0.2,0.5,0.8")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--weights", help="a weights directory (default: the bundled model)")
    parser.add_argument("--out", type=Path, help="write every task's estimates to this CSV")
    args = parser.parse_args()
    slugs = DATASET_SLUGS if args.datasets == "all" else tuple(args.datasets.split(","))
    jobs = [(slug, rep, float(pi)) for pi in args.pis.split(",") for slug in slugs
            for rep in range(args.repeats)]
    rows = Parallel(n_jobs=args.jobs)(delayed(replicate)(*job, args.weights) for job in jobs)
    frame = pd.DataFrame(rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    errors = frame[list(ESTIMATES)].sub(frame["pi"], axis=0).abs()
    errors["target_pi"] = frame["target_pi"]
    table = errors.groupby("target_pi").mean()
    table.insert(0, "tasks", frame.groupby("target_pi").size())
    table.insert(1, "auc", frame.groupby("target_pi")["auc"].mean())
    print("mean |π̂ − π| per target π:")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
