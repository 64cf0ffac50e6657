"""The default classifier on a table as a new user brings one: 20,000 rows of 13 mixed columns
(numbers, a text column, a date, a flag, missing values and an ID), a few hundred of its
positives labeled. Seconds and the pool's AUC of the default, the model alone and the project's
PU-bagging baseline, the methods taking turns in one process (docs/performance.md, "A
new user's table").

    python -m speed.mixed_table --rows 20000 --labeled 300 --repeats 1
    # another checkout's classifier, for a before/after comparison on one machine:
    PYTHONPATH=/path/to/other/checkout python speed/mixed_table.py --methods default

The table is drawn from ``--seed``: about half of the rows positive, the label a mix of a
linear signal, a threshold on an amount, a category and the season of the date, the labeled
positives drawn at random among the positives (SCAR); the ID is a string that differs on every
row (the classifier drops it as an identifier).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CITIES = [f"city_{i:02d}" for i in range(25)]
PLANS = ["basic", "plus", "pro", "family"]


def mixed_table(rows: int, labeled: int, seed: int = 0):
    """(X, s, y): a pandas DataFrame of 13 columns, the labeled mask as 0/1 and the hidden
    labels of every row."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    city = rng.integers(0, len(CITIES), rows)
    plan = rng.integers(0, len(PLANS), rows)
    day = rng.integers(0, 3 * 365, rows)
    amount = rng.lognormal(3.0, 1.0, rows)
    numbers = rng.normal(size=(rows, 6))
    # the positives: a linear signal, larger amounts, some cities and plans, winter dates
    lift = (0.6 * numbers[:, 0] - 0.4 * numbers[:, 1] + 0.8 * (amount > 40)
            + 0.7 * (city % 5 == 0) + 0.5 * (plan == 2)
            + 0.6 * (np.cos(day / 365 * 2 * np.pi) > 0.5))
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-2.0 * (lift - np.median(lift))))).astype(int)
    s = np.zeros(rows, dtype=int)
    s[rng.choice(np.flatnonzero(y == 1), size=labeled, replace=False)] = 1  # SCAR
    frame = pd.DataFrame({f"x{i}": numbers[:, i] for i in range(6)})
    frame.loc[rng.random(rows) < 0.1, "x2"] = np.nan  # missing values
    frame.loc[rng.random(rows) < 0.05, "x3"] = np.nan
    frame["amount"] = amount.round(2)
    frame["visits"] = rng.poisson(3 + y)
    frame["city"] = np.asarray(CITIES, dtype=object)[city]
    frame["plan"] = np.asarray(PLANS, dtype=object)[plan]
    frame["joined"] = pd.Timestamp("2022-01-01") + pd.to_timedelta(day, unit="D")
    frame["newsletter"] = rng.random(rows) < 0.3 + 0.2 * y
    frame["customer_id"] = [f"C{index:07d}" for index in rng.permutation(rows)]
    return frame, s, y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.mixed_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--labeled", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="default,model-alone,pu-bagging",
                        help="of default, model-alone, pu-bagging")
    args = parser.parse_args(argv)
    import warnings

    from sklearn.metrics import roc_auc_score

    from puicl_model import PUICLClassifier

    X, s, y = mixed_table(args.rows, args.labeled, args.seed)
    pool = X[s == 0]

    def puicl(partner: str) -> np.ndarray:
        clf = PUICLClassifier(random_state=0, progress=False, portfolio=partner).fit(X, s)
        return clf.predict_proba(pool)[:, 1]

    def bagging() -> np.ndarray:
        from benchmark.methods.pu_bagging import PUBagging
        from puicl_model.estimator.learners import learner_encoding

        x = learner_encoding().fit_transform(X, s == 1).astype(np.float64)
        return PUBagging().fit_predict(x, s, 0).scores

    runs = {"default": lambda: puicl("auto"), "model-alone": lambda: puicl("none"),
            "pu-bagging": bagging}
    methods = args.methods.split(",")
    print(f"{args.rows:,} rows, {args.labeled} labeled, pool {len(pool):,} "
          f"({(y[s == 0] == 0).mean():.2f} negative)")
    for repeat in range(args.repeats):
        for method in methods:
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores = runs[method]()
            seconds = time.perf_counter() - began
            print(f"{method:12s} repeat {repeat}: {seconds:7.2f} s  AUC "
                  f"{roc_auc_score(y[s == 0], scores):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
