"""What reading a CSV's text columns as numbers or dates costs ``puicl predict``'s scan: the scan
(:func:`puicl_model.files.table_io.scan_table`) of a CSV with text columns, timed as it is and
with the text tally left out (what the scan did before text was read as numbers or dates), and
one batch read of the file with those columns turned (dates parsed, stray cells blanked).

    .venv/bin/python -m speed.csv_scan --rows 1000000 --out results/csv_scan

The table (written once under ``--out``) holds a category of 3 words, an ID as text, ISO 8601
dates, numbers with one stray word in 10,000, and plain numbers. Each timing is the best of
``--repeats`` runs in this process.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd


def write_table(out: Path, rows: int) -> Path:
    path = out / f"text_{rows}.csv"
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    amount = rng.normal(size=rows).round(3).astype(str).astype(object)
    amount[rng.random(rows) < 1e-4] = "n/k"
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 2000, rows), unit="D")
    pd.DataFrame({
        "city": rng.choice(["north", "south", "east"], rows),
        "code": [f"C-{value}" for value in rng.permutation(rows)],
        "day": days.strftime("%Y-%m-%d"),
        "amount": amount,
        "x": rng.normal(size=rows),
        "s": (rng.random(rows) < 0.1).astype(int),
    }).to_csv(path, index=False)
    return path


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    from puicl_model.files import table_io

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = write_table(args.out, args.rows)
    scan = table_io.scan_table(path, "s")
    result = {"rows": args.rows, "types": scan.csv_types,
              "scan_s": best_of(args.repeats, lambda: table_io.scan_table(path, "s"))}
    tally = table_io._tally
    table_io._tally = lambda *_: None  # the scan without the text tally
    try:
        result["scan_without_tally_s"] = best_of(
            args.repeats, lambda: table_io.scan_table(path, "s"))
    finally:
        table_io._tally = tally
    result["read_s"] = best_of(args.repeats, lambda: list(table_io.read_batches(scan, 100_000)))
    print(json.dumps(result, indent=1))
    (args.out / f"csv_scan_{args.rows}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
