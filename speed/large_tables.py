"""Rows per second and peak memory of ``puicl predict`` on Parquet pools of growing size, beside
the in-memory path doing what the command does (read, ``PUICLClassifier().fit(X, s)``,
``predict_and_proba(pool)``, π's report, the scores written), their ratio, and the bytes of a
pool scored on a 2-worker dask ``LocalCluster`` against one process (docs/classifier.md,
"Large tables"; figures in docs/performance.md).

    .venv/bin/python -m speed.large_tables --rows 200000,2000000 --in-memory 200000 \
        --out results/large_tables
    # the model scoring every row (no portfolio), where new rows cost the most:
    .venv/bin/python -m speed.large_tables --rows 200000 --in-memory 200000 --portfolio none
    .venv/bin/python -m speed.large_tables --rows 1000000 --columns 5 --dask

Each measurement runs in a fresh process, whose peak resident memory (``ru_maxrss``) is read
when it ends. The tables are written once under ``--out`` (2,000 labeled positives and a pool
of ``--columns`` numeric columns, in row groups of 100,000 rows) and reused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LABELED = 2_000


def write_tables(out: Path, rows: int, columns: int) -> tuple[Path, Path]:
    """The positives and a pool of ``rows`` rows (half of them positives), written once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    positives, pool = out / f"positives_{columns}.parquet", out / f"pool_{rows}_{columns}.parquet"
    names = [f"x{i}" for i in range(columns)]
    shift = np.linspace(0.2, 1.0, columns)
    if not positives.exists():
        rng = np.random.default_rng(0)
        table = pa.table(dict(zip(names, (rng.normal(size=(LABELED, columns)) + shift).T,
                                  strict=True)))
        pq.write_table(table, positives)
    if not pool.exists():
        writer = None
        for start in range(0, rows, 100_000):
            rng = np.random.default_rng([1, start])
            n = min(100_000, rows - start)
            x = rng.normal(size=(n, columns)) + shift * (rng.random(n) < 0.5)[:, None]
            part = pa.table(dict(zip(names, x.T, strict=True)))
            writer = writer or pq.ParquetWriter(pool, part.schema)
            writer.write_table(part)
        writer.close()
    return positives, pool


def measured(code: str) -> dict:
    """Run ``code`` in a fresh Python; it prints one JSON line; add its peak memory in MB."""
    suffix = ("\nimport json, resource\nprint(json.dumps({**result, 'peak_mb': "
              "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))")
    done = subprocess.run([sys.executable, "-c", code + suffix], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cli_run(positives: Path, pool: Path, output: Path, extra: list[str]) -> dict:
    args = ["predict", "--positives", str(positives), "--unlabeled", str(pool), "-o",
            str(output), "--no-progress", *extra]
    return measured(f"""
import time, contextlib, io
import puicl_model.estimator.classifier, puicl_model.files.large_tables  # (torch: untimed)
from puicl_model.files.cli import main
started = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    assert main({args!r}) == 0
result = {{'seconds': time.perf_counter() - started}}""")


def in_memory_run(positives: Path, pool: Path, portfolio: str = "auto") -> dict:
    """The in-memory path doing what ``puicl predict`` does: read, fit, score the pool, π's
    report, the scores written (both runs import torch before their clocks start)."""
    return measured(f"""
import time, numpy as np, pandas as pd
from puicl_model import PUICLClassifier
started = time.perf_counter()
p, u = pd.read_parquet({str(positives)!r}), pd.read_parquet({str(pool)!r})
X = pd.concat([p, u], ignore_index=True)
s = np.r_[np.ones(len(p), int), np.zeros(len(u), int)]
clf = PUICLClassifier(progress=False, portfolio={portfolio!r}).fit(X, s)
proba, labels = clf.predict_and_proba(u)
clf.class_prior_report()  # what puicl predict prints
pd.DataFrame({{'row': np.arange(len(u)), 'p_positive': proba[:, 1], 'label': labels}}).to_parquet(
    {str(pool.parent / "in_memory_scores.parquet")!r})
result = {{'seconds': time.perf_counter() - started}}""")


def dask_check(positives: Path, pool: Path, out: Path) -> dict:
    """The pool scored by ``puicl predict`` on one process and on a 2-worker LocalCluster."""
    from distributed import LocalCluster

    local, spread = out / "dask_local.parquet", out / "dask_cluster.parquet"
    times = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        for name, path, extra in (("one process", local, []),
                                  ("2-worker LocalCluster", spread,
                                   ["--scheduler", cluster.scheduler_address])):
            times[name] = cli_run(positives, pool, path, extra)["seconds"]
    import pandas as pd

    # the same scores, bit for bit (the files' row groups follow the batches and partitions)
    same = pd.read_parquet(local).equals(pd.read_parquet(spread))
    return {"same_scores": same, "seconds": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="200000,2000000", help="pool sizes, comma-separated")
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--in-memory", default="", help="pool sizes to also run in memory")
    parser.add_argument("--dask", action="store_true", help="the 2-worker check instead")
    parser.add_argument("--out", type=Path, default=Path("results/large_tables"))
    parser.add_argument("--portfolio", "--partner", default="auto", choices=("auto", "none"),
                        help="the classifier's portfolio in both paths (none: the model scores "
                        "every row, the portfolio's learners do not run; --partner: its former "
                        "name)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    in_memory = {int(n) for n in args.in_memory.split(",") if n}
    lines = []
    for rows in (int(n) for n in args.rows.split(",")):
        positives, pool = write_tables(args.out, rows, args.columns)
        if args.dask:
            found = dask_check(positives, pool, args.out)
            lines.append(f"| {rows:,} | dask | {json.dumps(found)} |")
            print(lines[-1], flush=True)
            continue
        runs = {"puicl predict": cli_run(positives, pool, args.out / "scores.parquet",
                                         ["--portfolio", args.portfolio])}
        if rows in in_memory:
            runs["in memory"] = in_memory_run(positives, pool, args.portfolio)
        for name, run in runs.items():
            lines.append(f"| {rows:,} | {name} | {rows / run['seconds']:,.0f} rows/s | "
                         f"{run['seconds']:.0f} s | {run['peak_mb']:,.0f} MB |")
            print(lines[-1], flush=True)
        if "in memory" in runs:  # the bar: the batch path's overhead over one piece
            ratio = runs["puicl predict"]["seconds"] / runs["in memory"]["seconds"]
            lines.append(f"| {rows:,} | puicl predict / in memory | {ratio:.2f}x | | |")
            print(lines[-1], flush=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (args.out / "summary.md").write_text(f"{stamp}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
