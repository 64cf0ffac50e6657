"""The development suite's table of several runs side by side (docs/dev_suite.md, "The
baseline of every decision").

Each ``--run LABEL=DIR`` is the output folder of a ``puicl-bench --suite dev`` run over several
π (``DIR/pi_0.2/results.csv``, ...). A PUICL run is named by its label (``puicl-v1.1=...``); the
baselines of a run keep their names. Only the first ``--repetitions`` repetitions of every run
enter the table (default: the most that every run has), so that every row is measured on the
same tasks. Writes the merged per-table CSV and prints the markdown table.

    python -m studies.devsuite_table --run puicl-v1.1=results/dev_v11 \\
        --run puicl-v1=results/dev_v1 --run baselines=results/dev_baselines \\
        --csv docs/benchmark/devsuite/per_table.csv --figure docs/benchmark/devsuite/auc.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from benchmark.report import METHOD_LABELS
from benchmark.summary import per_table_frame, plot_summary, summary_markdown


def read_run(label: str, folder: Path) -> dict[float, pd.DataFrame]:
    """A run's results per target π, its PUICL rows renamed to ``label``."""
    frames = {}
    for results in sorted(folder.glob("pi_*/results.csv")):
        pi = float(results.parent.name.removeprefix("pi_"))
        frame = pd.read_csv(results)
        frame["method"] = frame["method"].replace({"puicl": label})
        frames[pi] = frame
    if not frames:
        raise SystemExit(f"{folder}: no pi_*/results.csv (run puicl-bench --suite dev first)")
    return frames


def merge(runs: list[tuple[str, Path]], repetitions: int | None) -> tuple[pd.DataFrame, int]:
    """The runs' per-table means over their first ``repetitions`` repetitions."""
    parts = [read_run(label, folder) for label, folder in runs]
    pis = set.intersection(*(set(p) for p in parts))
    common = min(int(f["repetition"].max()) + 1 for p in parts for f in p.values())
    repetitions = common if repetitions is None else repetitions
    if repetitions > common:
        raise SystemExit(f"--repetitions {repetitions}: some run has only {common}")
    merged = {pi: pd.concat([p[pi] for p in parts], ignore_index=True) for pi in sorted(pis)}
    merged = {pi: f[f["repetition"] < repetitions] for pi, f in merged.items()}
    return per_table_frame(merged), repetitions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=DIR")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--csv", type=Path, help="write the merged per-table means here")
    parser.add_argument("--figure", type=Path, help="draw mean AUC against π here")
    parser.add_argument("--no-pi-hat", action="store_true",
                        help="leave out the π̂ columns (runs made with different estimators)")
    args = parser.parse_args(argv)
    runs = []
    for item in args.run:
        label, _, folder = item.partition("=")
        if not label or not folder:
            parser.error(f"--run {item!r}: expected LABEL=DIR")
        runs.append((label, Path(folder)))
    per_table, repetitions = merge(runs, args.repetitions)
    methods = list(dict.fromkeys(per_table["method"]))
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        per_table.to_csv(args.csv, index=False, float_format="%.6g")
    if args.figure:
        plot_summary(per_table, methods, args.figure, METHOD_LABELS,
                     title="Development suite: AUC on the unlabeled pool")
    print(f"Repetitions per table and π: {repetitions}\n")
    print(summary_markdown(per_table, methods, METHOD_LABELS, pi_hat=not args.no_pi_hat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
