"""The size grid: the development suite's tasks at every size, the yardstick of how quality and
time grow with the task.

The paper's protocol caps a task at 600 positives (§6.1). The grid builds the same tasks
(:func:`benchmark.protocol.make_task`, the same draws) under several caps — by default 600,
3,000 and every positive of the table — at several target negative shares π of the pool, and
runs PUICL and the baselines on each through the benchmark's runner (one cached run per cell,
``OUT/size_<cap>/pi_<π>``, so a rerun resumes). It writes:

* ``OUT/grid.csv``: one row per (table, repetition, method, cap, π) with the task's sizes, the
  realized π, AUC, the accuracy of the method's labels, |π̂ − π| (where it estimates π) and
  seconds;
* ``OUT/grid.md``: per cell and method the mean AUC; per cell PUICL minus the better baseline
  with the standard error of the per-table differences; the realized π; seconds per method;
* ``OUT/grid.png``: mean AUC against the mean number of labeled rows, one line per method and
  one panel per π.

Usage (docs/benchmark.md, "Tasks of every size")::

    python -m benchmark.size_grid --out results/size_grid --jobs 2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.cli import exit_status, parse_pis, run_options
from benchmark.methods import METHOD_NAMES
from benchmark.protocol import parse_max_positives, size_words
from benchmark.runner import RunSpec, expand_names, run
from benchmark.suites import get_suite
from puicl_common.atomic import atomic_output, atomic_write_text

DEFAULT_SIZES = "600,3000,all"
DEFAULT_PIS = "0.1,0.2,0.5,0.8"
DEFAULT_METHODS = "puicl,elkan-noto,pu-bagging"
COLUMNS = ["dataset", "repetition", "method", "max_positives", "pi_target", "pi_true",
           "n_labeled", "n_unlabeled", "auc", "accuracy", "pi_abs_error", "fit_predict_s"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmark.size_grid",
        description="PUICL and the baselines on the development suite's tasks at several "
        "sizes and pool compositions: mean AUC per cell, PUICL minus the better baseline, "
        "seconds, and AUC against the number of labeled rows.")
    parser.add_argument("--out", type=Path, required=True, help="output folder (and its cache)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help=f"caps on the positives of a task, or 'all' (default {DEFAULT_SIZES})")
    parser.add_argument("--pi", default=DEFAULT_PIS,
                        help=f"target negative shares of the pool (default {DEFAULT_PIS})")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help=f"the first is compared with the others (default {DEFAULT_METHODS})")
    parser.add_argument("--datasets", default="all", help="suite tables, or 'all'")
    parser.add_argument("--repeats", type=int, default=1, help="repetitions per table and cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    parser.add_argument("--weights", type=Path, default=None, help="PUICL weights")
    parser.add_argument("--data-dir", type=Path, default=None, help="the suite's folder")
    parser.add_argument("--method-config", type=Path, default=None,
                        help="YAML mapping method name -> settings (as puicl-bench takes)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def grid_specs(args: argparse.Namespace) -> list[RunSpec]:
    """One run spec per (cap, π) cell."""
    suite = get_suite("dev")
    methods = expand_names(args.methods, METHOD_NAMES, "method")
    datasets = expand_names(args.datasets, suite.slugs(args.data_dir), "dataset")
    sizes = [parse_max_positives(part) for part in args.sizes.split(",")]
    pis = parse_pis(args.pi, "dev")
    overrides = run_options(args)
    return [RunSpec(methods=methods, datasets=datasets, repeats=args.repeats,
                    out=args.out / f"size_{size_words(size).replace(',', '')}" / f"pi_{pi:g}",
                    seed=args.seed, data_dir=args.data_dir, weights=args.weights,
                    jobs=args.jobs, method_overrides=overrides, target_pi=pi, suite="dev",
                    max_positives=size)
            for size in sizes for pi in pis]


def grid_frame(specs: Sequence[RunSpec], records: Sequence[Sequence[dict]]) -> pd.DataFrame:
    """One row per replicate of every cell."""
    rows = []
    for spec, cell in zip(specs, records, strict=True):
        for record in cell:
            rows.append({**record, "max_positives": spec.max_positives,
                         "pi_target": spec.target_pi,
                         "n_unlabeled": record["n_u_pos"] + record["n_u_neg"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def _cell_rows(frame: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """Markdown rows: per cell, each method's mean AUC and the first method minus the better
    of the others, with the standard error of the per-table differences."""
    first, others = methods[0], list(methods[1:])
    rows = []
    for (size, pi), cell in frame.groupby(["max_positives", "pi_target"], sort=True):
        per_table = cell.pivot_table(index="dataset", columns="method", values="auc")
        means = per_table.mean()
        line = [size_words(int(size)), f"{pi:g}", f"{cell['n_labeled'].mean():.0f}",
                f"{cell['pi_true'].mean():.3f}"]
        line += [f"{means.get(m, np.nan):.4f}" for m in methods]
        if others:
            better = max(others, key=lambda m: means.get(m, -np.inf))
            diff = (per_table[first] - per_table[better]).dropna()
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan
            line += [f"{diff.mean():+.4f} ± {se:.4f} ({better})"]
        rows.append("| " + " | ".join(line) + " |")
    return rows


def grid_markdown(frame: pd.DataFrame, methods: Sequence[str]) -> str:
    first = methods[0]
    head = ["cap", "π target", "labeled rows", "realized π", *methods]
    if len(methods) > 1:
        head.append(f"{first} − better baseline ± SE")
    lines = [
        "### Mean AUC per cell (development suite)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *_cell_rows(frame, methods),
        "",
        "### Seconds per method (fit and predict, summed over the cell's tasks)",
        "",
        "| cap | " + " | ".join(methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    seconds = frame.pivot_table(index="max_positives", columns="method",
                                values="fit_predict_s", aggfunc="sum")
    for size, row in seconds.iterrows():
        lines.append(f"| {size_words(int(size))} | "
                     + " | ".join(f"{row.get(m, np.nan):.1f}" for m in methods) + " |")
    return "\n".join(lines) + "\n"


def plot_grid(frame: pd.DataFrame, methods: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    pis = sorted(frame["pi_target"].unique())
    fig, axes = plt.subplots(1, len(pis), figsize=(3.6 * len(pis), 3.4), squeeze=False,
                             sharey=True)
    for ax, pi in zip(axes[0], pis, strict=True):
        cell = frame[frame["pi_target"] == pi]
        for method in methods:
            rows = cell[cell["method"] == method].groupby("max_positives")
            ax.plot(rows["n_labeled"].mean(), rows["auc"].mean(), marker="o", label=method)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"π = {pi:g}")
        ax.set_xlabel("mean labeled rows per task")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean AUC (development suite)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as temporary:
        fig.savefig(temporary, format="png")
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return exit_status("size_grid", lambda: _grid(args))


def _grid(args: argparse.Namespace) -> int:
    specs = grid_specs(args)
    records = [run(spec, progress=False if args.no_progress else None) for spec in specs]
    frame = grid_frame(specs, records)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_output(args.out / "grid.csv") as temporary:
        frame.to_csv(temporary, index=False)
    atomic_write_text(args.out / "grid.md", grid_markdown(frame, specs[0].methods))
    plot_grid(frame, specs[0].methods, args.out / "grid.png")
    print(f"size_grid: wrote {args.out / 'grid.md'}, {args.out / 'grid.csv'}, "
          f"{args.out / 'grid.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
