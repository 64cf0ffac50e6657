"""What a table costs: seconds of the default classifier and of the model alone
(``portfolio="none"``), fit and ``predict_proba`` of the pool, over a grid of table sizes, the two
taking turns table by table in one process (docs/performance.md, "What a table costs").

    python -m speed.cost_model                      # on this machine's CPU
    python -m speed.cost_model --device cuda        # on a GPU (run by speed/gpu_check.sh)
    python -m speed.cost_model --rows 1000 --features 10 --threads 1   # one cell

A table of ``n`` rows and ``d`` numeric columns holds ``labeled-share`` of its rows as labeled
positives (at least 20) and a pool whose ``pool-negatives`` share (default half) are negatives
shifted by one standard deviation. The paper's size, 200 labeled positives and a pool of 500
with 20 % negatives: ``--rows 700 --labeled-share 0.2858 --pool-negatives 0.2``. Prints one
line per table and setting, then a Markdown table of seconds and of microseconds per row.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def table(rows: int, features: int, labeled_share: float, seed: int = 0,
          pool_negatives: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, rows, features])
    labeled = max(20, round(labeled_share * rows))
    x = rng.normal(size=(rows, features))
    negative = np.zeros(rows, dtype=bool)
    negative[labeled:] = rng.random(rows - labeled) < pool_negatives
    x[negative] += 1.0
    s = np.zeros(rows, dtype=int)
    s[:labeled] = 1
    return x, s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.cost_model",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000,5000,20000")
    parser.add_argument("--features", default="10,50")
    parser.add_argument("--labeled-share", type=float, default=0.1)
    parser.add_argument("--pool-negatives", type=float, default=0.5,
                        help="the pool's share of negatives")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads and the classifier's n_threads (default: all)")
    args = parser.parse_args(argv)
    import torch

    from puicl_model import PUICLClassifier

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [int(v) for v in args.rows.split(",")]
    features = [int(v) for v in args.features.split(",")]
    settings = {"default": "auto", "model alone": "none"}
    # one untimed call of each first: imports, the weights' load and the first kernels
    x, s = table(300, 5, args.labeled_share)
    for partner in settings.values():
        PUICLClassifier(random_state=0, portfolio=partner, device=args.device,
                        n_threads=args.threads, progress=False).fit(x, s).predict_proba(x[s == 0])
    results: dict[tuple[int, int, str], float] = {}
    for n in rows:
        for d in features:
            x, s = table(n, d, args.labeled_share, pool_negatives=args.pool_negatives)
            for name, partner in settings.items():
                began = time.perf_counter()
                clf = PUICLClassifier(random_state=0, portfolio=partner, device=args.device,
                                      n_threads=args.threads, progress=False)
                clf.fit(x, s).predict_proba(x[s == 0])
                seconds = results[n, d, name] = time.perf_counter() - began
                print(f"{n:>7,} rows {d:>3} columns {int(s.sum()):>5} labeled  {name:12s} "
                      f"{seconds:7.2f} s", flush=True)
    print("\n| rows × columns (labeled) | default, s | model alone, s | default, µs a row "
          "| model alone, µs a row |\n|---|---:|---:|---:|---:|")
    for n in rows:
        for d in features:
            labeled = max(20, round(args.labeled_share * n))
            default, alone = results[n, d, "default"], results[n, d, "model alone"]
            print(f"| {n:,} × {d} ({labeled:,}) | {default:.2f} | {alone:.2f} | "
                  f"{default / n * 1e6:,.0f} | {alone / n * 1e6:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
