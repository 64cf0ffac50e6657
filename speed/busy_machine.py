"""The classifier's default on a machine busy with other work: its time beside ``--busy``
processes that each spin one core, against its time with none, side by side.

A table of ``--rows`` rows (``--labeled`` of them labeled positives, 10 numeric columns) is
fitted and its pool scored by ``PUICLClassifier()`` with its defaults (the portfolio, whose
boosted trees are where a busy machine made fits a hundred times slower: see
``puicl_model.estimator.learners``). Rounds alternate quiet and busy, ``--repeats`` of each;
the figure is each condition's median and their ratio. The busy processes are plain Python
loops started before a busy round and killed after it.

    python -m speed.busy_machine --rows 1000 --busy 2 --repeats 3
    # the new user's table of speed/mixed_table.py (20,000 rows, 300 labeled):
    python -m speed.busy_machine --mixed --rows 20000 --labeled 300 --busy 2 --repeats 2
    # another checkout's code, for a before/after comparison on one machine:
    PYTHONPATH=/path/to/other/checkout python -m speed.busy_machine
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any

import numpy as np

SPIN = "while True: pass"


def table(rows: int, labeled: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    positive = np.ones(rows, dtype=bool)
    positive[labeled:] = rng.random(rows - labeled) < 0.5
    x = rng.normal(size=(rows, 10)) + positive[:, None] * np.linspace(0.1, 0.8, 10)
    s = np.zeros(rows, dtype=int)
    s[:labeled] = 1
    return x, s


def one_fit(x: Any, s: np.ndarray, n_threads: int | None = None) -> float:
    """Seconds of the default classifier's fit and pool scoring."""
    from puicl_model import PUICLClassifier

    began = time.perf_counter()
    pool = x[s == 0]
    with warnings.catch_warnings():  # the mixed table's ID column is dropped with a warning
        warnings.simplefilter("ignore")
        PUICLClassifier(random_state=0, progress=False,
                        n_threads=n_threads).fit(x, s).predict_proba(pool)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.busy_machine",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--labeled", type=int, default=200)
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside it")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="the classifier's n_threads (default: its own, every core)")
    parser.add_argument("--mixed", action="store_true",
                        help="the mixed table of speed/mixed_table.py (text, a date, missing "
                        "values, an ID) instead of 10 numeric columns")
    args = parser.parse_args(argv)
    if args.mixed:
        from speed.mixed_table import mixed_table

        x, s, _ = mixed_table(args.rows, args.labeled)
        one_fit(*table(1000, 200))  # warm-up: imports, the weights, the kernels
    else:
        x, s = table(args.rows, args.labeled)
        one_fit(x, s)  # warm-up: imports, the weights, the kernels
    seconds: dict[str, list[float]] = {"quiet": [], "busy": []}
    for _ in range(args.repeats):
        seconds["quiet"].append(one_fit(x, s, args.threads))
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
        try:
            time.sleep(0.5)  # the spinners running
            seconds["busy"].append(one_fit(x, s, args.threads))
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
    quiet, busy = (statistics.median(seconds[k]) for k in ("quiet", "busy"))
    print(f"{args.rows} rows, {args.labeled} labeled, default settings: quiet "
          f"{quiet:.2f} s ({', '.join(f'{t:.2f}' for t in seconds['quiet'])}), beside "
          f"{args.busy} busy processes {busy:.2f} s "
          f"({', '.join(f'{t:.2f}' for t in seconds['busy'])}): {busy / quiet:.1f}x",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
