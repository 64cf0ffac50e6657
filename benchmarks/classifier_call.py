"""Seconds of one (P, n_u, d) classifier call: fit + predict_proba of the pool, with the
bundled checkpoint, best of N in this process (docs/performance.md, Trainer / backends).

    .venv/bin/python benchmarks/classifier_call.py --repeats 10
    # the same task with another checkout's code, to compare two versions side by side:
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/classifier_call.py

Prints the best time and the first three probabilities (equal across versions that compute
the same function).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from puicl_model import PUICLClassifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="200,800,20", help="P,n_u,d (default 200,800,20)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    labeled, pool, features = (int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(labeled + pool, features))
    X[labeled + pool // 2:] += 1.0  # half the pool shifted: the negatives
    s = np.r_[np.ones(labeled, int), np.zeros(pool, int)]
    PUICLClassifier(random_state=0).fit(X, s).predict_proba(X[s == 0])  # warm-up
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        proba = PUICLClassifier(random_state=0).fit(X, s).predict_proba(X[s == 0])
        best = min(best, time.perf_counter() - start)
    print(f"{best:.4f} s; P(positive) of the first pool rows: {proba[:3, 1].round(6).tolist()}")


if __name__ == "__main__":
    main()
