"""Seconds of one (P, n_u, d) classifier call: fit + predict_proba of the pool, with the
bundled checkpoint, best of N in this process (docs/performance.md, Trainer / backends).

    .venv/bin/python -m speed.classifier_call --repeats 10
    # the same task with another checkout's code, to compare two versions side by side:
    PYTHONPATH=/path/to/other/checkout .venv/bin/python -m speed.classifier_call
    # ensembles of 1-4 members, taking turns call by call (their ratios to the first):
    .venv/bin/python -m speed.classifier_call --n-estimators 1,2,3,4 --repeats 10
    # the default (n_estimators=None) against the single pass, on a table whose last 5
    # columns are categorical (the default adds a member there):
    .venv/bin/python -m speed.classifier_call --n-estimators 1,default --categorical 5
    # a pool larger than single_pass_limit, scored in chunks of 200 and of 1,000 rows:
    .venv/bin/python -m speed.classifier_call --shape 200,8000,20 --chunk-size 200,1000
    # a large table with and without the portfolio, π̂ included (what puicl-bench times):
    .venv/bin/python -m speed.classifier_call --shape 3000,12000,20 --portfolio auto,none \
        --class-prior
    # what scoring 1,000 new rows costs after fit on a 20,000-row table, on the first call
    # (the contexts' forwards cached) and later ones, against 1,000 pool rows of fit's scoring:
    .venv/bin/python -m speed.classifier_call --shape 2000,18000,20 --new-rows 1000
    # a large pool scored in chunks and through shared contexts, π̂ included:
    .venv/bin/python -m speed.classifier_call --shape 2000,18000,20 --portfolio none \
        --large-pool chunks,shared --class-prior

Prints the best time and the first three probabilities (equal across versions that compute
the same function).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from puicl_model import PUICLClassifier


def parse_size(text: str) -> int | None:
    """An ensemble size, or None for the classifier's default ("default")."""
    return None if text.strip() == "default" else int(text)


def new_row_costs(table: np.ndarray | pd.DataFrame, s: np.ndarray, rows: int,
                  budgets: list[int], large_pool: str | None = None) -> list[str]:
    """Seconds to score ``rows`` new rows with the model alone (``portfolio="none"``), per
    context cache budget (``context_cache_bytes``): the first call and the second, beside
    the same number of pool rows inside the fitted pool's scoring (its passes' share).
    ``large_pool``: the classifier's setting (None: its default)."""
    rng = np.random.default_rng(1)
    columns = table.shape[1]
    new = rng.normal(size=(rows, columns)) + rng.integers(0, 2, size=(rows, 1))
    lines = []
    for budget in budgets:
        clf = PUICLClassifier(random_state=0, portfolio="none", context_cache_bytes=budget,
                              **({} if large_pool is None else {"large_pool": large_pool}))
        clf.fit(table, s)
        pool_share = clf.inference_seconds_ * rows / len(clf.x_pool_)
        seconds = []
        for _ in range(2):
            start = time.perf_counter()
            clf.predict_proba(new)
            seconds.append(time.perf_counter() - start)
        caches = clf.fitted_.contexts
        kept = "none" if caches is None else f"{len(caches)} ({caches.nbytes / 2**20:,.0f} MiB)"
        lines.append(f"context_cache_bytes={budget:,}: {rows:,} new rows {seconds[0]:.2f} s "
                     f"first call, {seconds[1]:.2f} s second call; {rows:,} pool rows in fit's "
                     f"scoring {pool_share:.2f} s ({clf.n_passes_} passes, "
                     f"{clf.inference_seconds_:.2f} s for {len(clf.x_pool_):,} rows); "
                     f"contexts cached: {kept}")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="200,800,20", help="P,n_u,d (default 200,800,20)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n-estimators", default=None,
                        help="comma-separated ensemble sizes or 'default', timed in turns "
                        "(default: the classifier's default only)")
    parser.add_argument("--chunk-size", default=None,
                        help="comma-separated chunk sizes of pools larger than "
                        "single_pass_limit, timed in turns (default: the classifier's)")
    parser.add_argument("--categorical", type=int, default=0,
                        help="make the last K columns categorical: each value's quartile as "
                        "a text level (default 0: a numeric table)")
    parser.add_argument("--portfolio", "--partner", default=None,
                        help="comma-separated portfolio settings (auto, none), timed in turns "
                        "(default: the classifier's; --partner: its former name)")
    parser.add_argument("--class-prior", action="store_true",
                        help="time estimate_class_prior() too, as puicl-bench does")
    parser.add_argument("--new-rows", type=int, default=0, metavar="ROWS",
                        help="instead: seconds to score ROWS new rows after fit, first and "
                        "second call, beside ROWS pool rows of fit's scoring")
    parser.add_argument("--large-pool", default=None,
                        help="comma-separated large_pool settings to take turns (default: "
                        "the classifier's); with --new-rows, one of them")
    parser.add_argument("--cache-bytes", default=f"0,{1 << 30},{1 << 33}",
                        help="with --new-rows: comma-separated context_cache_bytes budgets")
    args = parser.parse_args()
    labeled, pool, features = (int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(labeled + pool, features))
    X[labeled + pool // 2:] += 1.0  # half the pool shifted: the negatives
    s = np.r_[np.ones(labeled, int), np.zeros(pool, int)]
    if not 0 <= args.categorical <= features:
        parser.error(f"--categorical must be in [0, {features}], got {args.categorical}")
    table: np.ndarray | pd.DataFrame = X
    if args.categorical:
        table = pd.DataFrame(X, columns=[f"x{j}" for j in range(features)])
        for j in range(features - args.categorical, features):
            quartile = np.searchsorted(np.quantile(X[:, j], [0.25, 0.5, 0.75]), X[:, j])
            table[f"x{j}"] = np.array(["q1", "q2", "q3", "q4"])[quartile]
    sizes = [None] if args.n_estimators is None else [
        parse_size(k) for k in args.n_estimators.split(",")
    ]
    chunks = [None] if args.chunk_size is None else [
        int(k) for k in args.chunk_size.split(",")
    ]
    if args.new_rows:
        new_row_costs(table, s, args.new_rows, [int(b) for b in args.cache_bytes.split(",")],
                      args.large_pool)
        return
    portfolios = [None] if args.portfolio is None else args.portfolio.split(",")
    pools = [None] if args.large_pool is None else args.large_pool.split(",")
    # every (n_estimators, chunk_size, portfolio, large_pool); None leaves the classifier's default
    variants = [{"n_estimators": size, **({} if chunk is None else {"chunk_size": chunk}),
                 **({} if portfolio is None else {"portfolio": portfolio}),
                 **({} if pool is None else {"large_pool": pool})}
                for size in sizes for chunk in chunks for portfolio in portfolios for pool in pools]

    def call(settings: dict) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        clf = PUICLClassifier(random_state=0, **settings)
        proba = clf.fit(table, s).predict_proba(table[s == 0])
        if args.class_prior:
            clf.estimate_class_prior()
        return time.perf_counter() - start, proba

    for settings in variants:
        call(settings)  # warm-up
    times: list[list[float]] = [[] for _ in variants]
    probas: list[np.ndarray] = [np.empty(0)] * len(variants)
    for _ in range(args.repeats):
        # in turns, so that the host's slow moments fall on every variant
        for i, settings in enumerate(variants):
            seconds, probas[i] = call(settings)
            times[i].append(seconds)
    for i, settings in enumerate(variants):
        best, median = min(times[i]), float(np.median(times[i]))
        ratio = "" if len(variants) == 1 else (
            f" ({median / float(np.median(times[0])):.2f}x the first's median)"
        )
        name = ", ".join(f"{key}={'default' if value is None else value}"
                         for key, value in settings.items())
        print(f"{name}: {best:.4f} s best, {median:.4f} s median{ratio}; "
              f"P(positive) of the first pool rows: {probas[i][:3, 1].round(6).tolist()}")


if __name__ == "__main__":
    main()
