"""A fingerprint of the classifier's scores: one sha256 over what a refactoring must not change.

Three parts, each hashed on its own and then together:

* ``tables``: on every development-suite table (its first 3,000 rows, a third of its positives
  labeled by a seeded draw, ``random_state=0``), ``predict_proba`` of every row of the table,
  the scikit-learn habit (labeled rows scored as new rows, pool rows as fitted);
* ``cli``: ``puicl predict`` on one of those tables written as Parquet, scored in batches of
  700 rows, and on a local dask cluster of two workers;
* ``portfolio``: a large table where the portfolio holds positives out of the passes
  (flights_ontime, every row, half of its positives labeled).

Run it before and after a change that should not move a bit, and compare the printed hashes::

    python -m studies.score_fingerprint --out results/fingerprint_before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

ROWS = 3000
CLI_TABLE = "ncbirths_lowweight"
PORTFOLIO_TABLE = "flights_ontime"


def _table(slug: str, rows: int | None, labeled_share: float) -> tuple[pd.DataFrame, np.ndarray]:
    from benchmark.devsuite import TARGET, devsuite_file, resolve_devsuite_dir

    frame = pd.read_csv(resolve_devsuite_dir(None) / devsuite_file(slug))
    if rows is not None:
        frame = frame.iloc[:rows].reset_index(drop=True)
    y = frame.pop(TARGET).to_numpy()
    positives = np.flatnonzero(y == 1)
    rng = np.random.default_rng(np.random.SeedSequence([0, len(frame)]))
    chosen = rng.choice(positives, size=max(1, round(labeled_share * len(positives))),
                        replace=False)
    s = np.zeros(len(frame), dtype=np.int64)
    s[chosen] = 1
    return frame, s


def _digest(arrays: Sequence[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()


def table_hashes(slugs: Sequence[str]) -> dict[str, str]:
    from puicl_model import PUICLClassifier

    hashes = {}
    for slug in slugs:
        started = time.perf_counter()
        X, s = _table(slug, ROWS, 1 / 3)
        clf = PUICLClassifier(random_state=0, n_threads=1, progress=False).fit(X, s)
        hashes[slug] = _digest([clf.predict_proba(X)])
        print(f"  {slug}: {hashes[slug][:16]} ({time.perf_counter() - started:.1f} s)",
              flush=True)
    return hashes


def cli_hashes(workdir: Path) -> dict[str, str]:
    X, s = _table(CLI_TABLE, ROWS, 1 / 3)
    table = workdir / "table.parquet"
    X.assign(labeled=s).to_parquet(table)
    command = [sys.executable, "-m", "puicl_model.files.cli", "predict", "--input", str(table),
               "--label-column", "labeled", "--batch-rows", "700", "--no-progress"]
    # one OpenMP thread in both runs: a LocalCluster sets OMP_NUM_THREADS=1 in this process's
    # environment, which the run after it inherits, and the pool's last bits depend on it
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    hashes = {}
    for name, extra in (("batched", []), ("dask", ["--scheduler", "local:2"])):
        if name == "dask":
            extra = _local_cluster_args(workdir)
            if extra is None:
                continue
        out = workdir / f"{name}.parquet"
        subprocess.run([*command, *extra, "--output", str(out)], check=True,
                       stdout=subprocess.DEVNULL, env=env)
        hashes[name] = _digest([pd.read_parquet(out)["p_positive"].to_numpy()])
        print(f"  cli {name}: {hashes[name][:16]}", flush=True)
    return hashes


def _local_cluster_args(workdir: Path) -> list[str] | None:
    try:
        from distributed import LocalCluster
    except ImportError:
        print("  cli dask: skipped (dask.distributed is not installed)")
        return None
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=None, processes=True)
    _CLUSTERS.append(cluster)
    return ["--scheduler", cluster.scheduler_address]


_CLUSTERS: list = []


def portfolio_hash() -> dict[str, str]:
    from puicl_model import PUICLClassifier

    X, s = _table(PORTFOLIO_TABLE, None, 0.5)
    clf = PUICLClassifier(random_state=0, n_threads=1, progress=False).fit(X, s)
    pool = X.iloc[np.flatnonzero(s == 0)]
    digest = _digest([clf.predict_proba(pool)])
    print(f"  portfolio ({clf.choice_.name}): {digest[:16]}", flush=True)
    return {PORTFOLIO_TABLE: digest}


def main(argv: Sequence[str] | None = None) -> int:
    from benchmark.devsuite import devsuite_slugs

    parser = argparse.ArgumentParser(prog="python -m studies.score_fingerprint",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file of the hashes")
    parser.add_argument("--parts", default="tables,cli,portfolio")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    result: dict[str, dict[str, str]] = {}
    try:
        if "tables" in parts:
            result["tables"] = table_hashes(devsuite_slugs())
        if "cli" in parts:
            with tempfile.TemporaryDirectory() as folder:
                result["cli"] = cli_hashes(Path(folder))
        if "portfolio" in parts:
            result["portfolio"] = portfolio_hash()
    finally:
        for cluster in _CLUSTERS:
            cluster.close()
    overall = hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()
    for part, hashes in result.items():
        print(f"{part}: {hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()}")
    print(f"all: {overall}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"all": overall, **result}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
