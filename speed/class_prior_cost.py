"""What asking for π̂ costs, next to a plain ``predict_proba`` call, in one process.

The table is the paper's task size: 200 labeled positives, 800 pool rows, 20 features. Each
round fits a fresh classifier, times ``predict_proba`` on the pool (its forward passes), then
``estimate_class_prior(K)`` for each fold count K (a fresh fit per K, after its
``predict_proba``, so that only π̂'s own passes are timed), and ``legacy``: the scorings of the
rule before cross-fitting (two halves of the labeled positives scored as new rows, and the pool
next to each half; ``studies/puicl_prior.py``'s ``legacy_halves``). With ``--report``, also
``class_prior_report()`` after ``predict_proba`` (``report``: the K = 2 scorings and the
bootstrap) and after ``estimate_class_prior()`` (``interval only``: the bootstrap and the bound
on the kept scores). Rounds interleave the calls; the medians and their ratio to
``predict_proba``'s are printed (docs/performance.md).

    python -m speed.class_prior_cost --folds 2,3,5 --rounds 5
    python -m speed.class_prior_cost --folds 2 --no-legacy --report --rounds 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from puicl_model import PUICLClassifier
from puicl_model.estimator.prior_report import DEFAULT_BOOTSTRAP


def table(n_labeled: int = 200, n_pool: int = 800, n_features: int = 20,
          ) -> tuple[np.ndarray, np.ndarray]:
    """A (labeled + pool, features) table: positives shifted by 0.5, half of the pool."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_labeled + n_pool, n_features))
    X[: n_labeled + n_pool // 2] += 0.5
    s = np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]
    return X, s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folds", default="2,3,5")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--weights", help="a weights directory (default: the bundled model)")
    parser.add_argument("--legacy", action=argparse.BooleanOptionalAction, default=True,
                        help="time the rule before cross-fitting too")
    parser.add_argument("--report", action="store_true",
                        help="time class_prior_report() too (the bound and π̂'s interval)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, s = table()
    pool = X[s == 0]
    folds = [int(k) for k in args.folds.split(",")]
    from studies.puicl_prior import legacy_halves

    seconds: dict[str, list[float]] = {"predict_proba": [], **{f"K={k}": [] for k in folds}}
    if args.legacy:
        seconds["legacy"] = []
    if args.report:
        seconds["report"], seconds["interval only"] = [], []
    for _ in range(args.rounds):
        clf = PUICLClassifier(args.weights, random_state=0, n_threads=1).fit(X, s)
        started = time.perf_counter()
        clf.predict_proba(pool)
        seconds["predict_proba"].append(time.perf_counter() - started)
        for k in folds:
            clf = PUICLClassifier(args.weights, random_state=0, n_threads=1).fit(X, s)
            clf.predict_proba(pool)
            started = time.perf_counter()
            clf.estimate_class_prior(k)
            seconds[f"K={k}"].append(time.perf_counter() - started)
        if args.legacy:
            clf = PUICLClassifier(args.weights, random_state=0, n_threads=1).fit(X, s)
            clf.predict_proba(pool)
            started = time.perf_counter()
            legacy_halves(clf)
            seconds["legacy"].append(time.perf_counter() - started)
        if args.report:
            clf = PUICLClassifier(args.weights, random_state=0, n_threads=1).fit(X, s)
            clf.predict_proba(pool)
            started = time.perf_counter()
            clf.class_prior_report()
            seconds["report"].append(time.perf_counter() - started)
            started = time.perf_counter()
            clf.class_prior_report(n_bootstrap=DEFAULT_BOOTSTRAP + 1)  # anew on kept scores
            seconds["interval only"].append(time.perf_counter() - started)
    base = float(np.median(seconds["predict_proba"]))
    print(f"median seconds over {args.rounds} rounds (one torch thread):")
    for name, values in seconds.items():
        median = float(np.median(values))
        print(f"  {name:14s} {median:6.3f} s  ({median / base:.2f}x predict_proba)")


if __name__ == "__main__":
    main()
