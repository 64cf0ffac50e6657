"""The size grid: the development suite's tasks at every size, the yardstick of how quality and
time grow with the task.

The paper's protocol caps a task at 600 positives (§6.1). The grid builds the same tasks
(:func:`benchmark.protocol.make_task`, the same draws) under several caps — by default 600,
3,000 and every positive of the table — at several target negative shares π of the pool, and
runs PUICL and the baselines on each through the benchmark's runner (one cached run per cell,
``OUT/size_<cap>/pi_<π>``, so a rerun resumes). It writes:

* ``OUT/grid.csv``: one row per (table, repetition, method, cap, π or label frequency) with
  the task's sizes, the realized π, AUC, the accuracy of the method's labels, |π̂ − π| (where
  it estimates π) and seconds;
* ``OUT/grid.md``: per cell and method the mean AUC; per cell PUICL minus the better baseline
  with the standard error of the per-table differences; the realized π; seconds per method;
  and per cell the judgement one table at a time: PUICL against the *per-task best baseline*
  (the better of the baselines on that task), the share of tasks more than
  :data:`BEHIND_BY` behind it, and the worst shortfall;
* ``OUT/grid.png``: mean AUC against the mean number of labeled rows, one line per method and
  one panel per π;
* ``OUT/per_task.png``: per cell, PUICL minus the per-task best baseline on every task,
  sorted.

Label-frequency cells (``--label-frequency 0.05,0.2``) label a share c of a table's drawn
positives and put every other row in the pool (:func:`benchmark.protocol.composition`): real PU
data is often labeled far more sparsely than the paper's third.

``--baselines GRID_CSV`` takes the other methods' rows of the same cells from an earlier
``grid.csv`` instead of running them again (a new PUICL judged against committed baselines):
only rows of methods not run now are taken, and a row whose task differs from this run's task
of the same table, repetition and cell (its labeled rows, pool rows or realized π) is refused.

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
from benchmark.protocol import TARGET_PI, parse_label_frequency, parse_max_positives, size_words
from benchmark.runner import RunSpec, expand_names, run
from benchmark.suites import get_suite
from puicl_common.atomic import atomic_output, atomic_write_text

DEFAULT_SIZES = "600,3000,all"
DEFAULT_PIS = "0.1,0.2,0.5,0.8"
DEFAULT_METHODS = "puicl,elkan-noto,pu-bagging"
COLUMNS = ["dataset", "repetition", "method", "max_positives", "pi_target", "label_frequency",
           "pi_true", "n_labeled", "n_unlabeled", "auc", "accuracy", "pi_abs_error",
           "fit_predict_s"]
# a task on which PUICL trails its best baseline by more than this counts as behind
BEHIND_BY = 0.02
# the cell key of a grid row: cap, π target (NaN in a label-frequency cell), label frequency
# (NaN in a π cell)
CELL = ["max_positives", "pi_target", "label_frequency"]


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
    parser.add_argument("--label-frequency", default=None, metavar="C[,C...]",
                        help="extra cells at each cap: a share C of the drawn positives labeled, "
                        "every other row in the pool (default: none)")
    parser.add_argument("--cells", default=None, metavar="CAP:PI|CAP:cC[,...]",
                        help="the cells themselves instead of every cap with every π and label "
                        "frequency: e.g. 600:0.5,all:0.2,all:c0.05 (a cap, then a π or c and a "
                        "label frequency)")
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
    parser.add_argument("--baselines", type=Path, default=None, metavar="GRID_CSV",
                        help="an earlier grid.csv: its rows of methods not run now join the "
                        "report, for the same cells and tasks (default: run every method)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def parse_cell(text: str) -> tuple[int, float, float | None]:
    """A ``--cells`` entry, ``CAP:PI`` or ``CAP:cC`` -> (max_positives, target π, label
    frequency or None)."""
    cap, colon, rest = text.strip().partition(":")
    if not colon:
        raise ValueError(f"--cells: {text.strip()!r} is not CAP:PI or CAP:cC")
    size = parse_max_positives(cap)
    if rest.startswith("c"):
        return size, TARGET_PI, parse_label_frequency(rest[1:])
    return size, parse_pis(rest, "dev")[0], None


def _cells(args: argparse.Namespace) -> list[tuple[int, float, float | None]]:
    if args.cells:
        return [parse_cell(part) for part in args.cells.split(",")]
    sizes = [parse_max_positives(part) for part in args.sizes.split(",")]
    pis = parse_pis(args.pi, "dev") if args.pi else ()
    frequencies = ([] if not args.label_frequency else
                   [parse_label_frequency(part) for part in args.label_frequency.split(",")])
    return ([(size, pi, None) for size in sizes for pi in pis]
            + [(size, TARGET_PI, c) for size in sizes for c in frequencies])


def grid_specs(args: argparse.Namespace) -> list[RunSpec]:
    """One run spec per cell: a cap with a π, or with a label frequency."""
    suite = get_suite("dev")
    methods = expand_names(args.methods, METHOD_NAMES, "method")
    datasets = expand_names(args.datasets, suite.slugs(args.data_dir), "dataset")
    cells = _cells(args)
    overrides = run_options(args)
    if not cells:
        raise ValueError("the grid has no cell: give --pi, --label-frequency or --cells")
    return [RunSpec(methods=methods, datasets=datasets, repeats=args.repeats,
                    out=(args.out / f"size_{size_words(size).replace(',', '')}"
                         / (f"pi_{pi:g}" if c is None else f"c_{c:g}")),
                    seed=args.seed, data_dir=args.data_dir, weights=args.weights,
                    jobs=args.jobs, method_overrides=overrides, target_pi=pi, suite="dev",
                    max_positives=size, label_frequency=c)
            for size, pi, c in cells]


def grid_frame(specs: Sequence[RunSpec], records: Sequence[Sequence[dict]]) -> pd.DataFrame:
    """One row per replicate of every cell."""
    rows = []
    for spec, cell in zip(specs, records, strict=True):
        for record in cell:
            frequency = spec.label_frequency
            rows.append({**record, "max_positives": spec.max_positives,
                         "pi_target": spec.target_pi if frequency is None else np.nan,
                         "label_frequency": np.nan if frequency is None else frequency,
                         "n_unlabeled": record["n_u_pos"] + record["n_u_neg"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def _cell_words(size: float, pi: float, frequency: float) -> list[str]:
    """A cell's cap and composition as the reports write them."""
    composition = f"c = {frequency:g}" if not np.isnan(frequency) else f"π = {pi:g}"
    return [size_words(int(size)), composition]


def _frame_cells(frame: pd.DataFrame):
    """(key, rows) per cell, π cells before label-frequency cells within a cap."""
    return frame.groupby(CELL, sort=True, dropna=False)


def _cell_rows(frame: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """Markdown rows: per cell, each method's mean AUC and the first method minus the better
    of the others, with the standard error of the per-table differences."""
    first, others = methods[0], list(methods[1:])
    rows = []
    for (size, pi, frequency), cell in _frame_cells(frame):
        per_table = cell.pivot_table(index="dataset", columns="method", values="auc")
        means = per_table.mean()
        line = [*_cell_words(size, pi, frequency), f"{cell['n_labeled'].mean():.0f}",
                f"{cell['pi_true'].mean():.3f}"]
        line += [f"{means.get(m, np.nan):.4f}" for m in methods]
        if others:
            better = max(others, key=lambda m: means.get(m, -np.inf))
            diff = (per_table[first] - per_table[better]).dropna()
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan
            line += [f"{diff.mean():+.4f} ± {se:.4f} ({better})"]
        rows.append("| " + " | ".join(line) + " |")
    return rows


def per_task_shortfall(cell: pd.DataFrame, methods: Sequence[str]) -> pd.Series:
    """Per task of a cell (table, repetition): the first method's AUC minus the best of the
    others' on that task."""
    per_task = cell.pivot_table(index=["dataset", "repetition"], columns="method", values="auc")
    best = per_task[list(methods[1:])].max(axis=1)
    return (per_task[methods[0]] - best).dropna()


def _judgement_rows(frame: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """Markdown rows: per cell, the first method against the per-task best of the others."""
    rows = []
    for (size, pi, frequency), cell in _frame_cells(frame):
        per_task = cell.pivot_table(index=["dataset", "repetition"], columns="method",
                                    values="auc")
        best = per_task[list(methods[1:])].max(axis=1)
        gap = (per_task[methods[0]] - best).dropna()
        worst = gap.idxmin()
        rows.append("| " + " | ".join([
            *_cell_words(size, pi, frequency), f"{len(gap)}",
            f"{per_task[methods[0]].mean():.4f}", f"{best.mean():.4f}",
            f"{gap.mean():+.4f}", f"{(gap < -BEHIND_BY).mean():.0%}",
            f"{gap.min():+.3f} ({worst[0]})"]) + " |")
    return rows


def grid_markdown(frame: pd.DataFrame, methods: Sequence[str]) -> str:
    first = methods[0]
    head = ["cap", "cell", "labeled rows", "realized π", *methods]
    if len(methods) > 1:
        head.append(f"{first} − better baseline ± SE")
    lines = [
        "### Mean AUC per cell (development suite)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *_cell_rows(frame, methods),
        "",
    ]
    if len(methods) > 1:
        judged = ["cap", "cell", "tasks", first, "per-task best baseline", "difference",
                  f"tasks > {BEHIND_BY} behind", "worst shortfall"]
        lines += [
            f"### {first} against the per-task best baseline (the better of "
            f"{', '.join(methods[1:])} on each task)",
            "",
            "| " + " | ".join(judged) + " |",
            "|" + "---|" * len(judged),
            *_judgement_rows(frame, methods),
            "",
        ]
    lines += [
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


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    with atomic_output(path) as temporary:
        fig.savefig(temporary, format="png")
    plt.close(fig)


def plot_grid(frame: pd.DataFrame, methods: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    frame = frame[frame["label_frequency"].isna()]  # the π cells' curves
    pis = sorted(frame["pi_target"].unique())
    if not pis:
        return
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
    _save(fig, path)


def plot_per_task(frame: pd.DataFrame, methods: Sequence[str], path: Path) -> None:
    """Per cell, the first method's AUC minus the per-task best baseline, sorted: a bar per
    task, the ±BEHIND_BY band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(_frame_cells(frame))
    columns = min(3, len(cells))
    rows = -(-len(cells) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.0 * rows),
                             squeeze=False, sharey=True)
    for ax, ((size, pi, frequency), cell) in zip(axes.flat, cells, strict=False):
        gap = np.sort(per_task_shortfall(cell, methods).to_numpy())
        colours = np.where(gap < -BEHIND_BY, "tab:red", "tab:blue")
        ax.bar(np.arange(len(gap)), gap, color=colours, width=0.9)
        ax.axhspan(-BEHIND_BY, BEHIND_BY, color="grey", alpha=0.15, lw=0)
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_title(f"cap {' · '.join(_cell_words(size, pi, frequency))}: "
                     f"{(gap < -BEHIND_BY).mean():.0%} behind", fontsize=9)
        ax.set_xlabel("task (sorted)")
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.flat[len(cells):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"AUC: {methods[0]} − best baseline")
    from matplotlib.patches import Patch

    axes[0][0].legend(handles=[Patch(color="tab:red", label=f"> {BEHIND_BY} behind"),
                               Patch(color="grey", alpha=0.3, label=f"within ±{BEHIND_BY}")],
                      fontsize=7, loc="upper left")
    fig.tight_layout()
    _save(fig, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return exit_status("size_grid", lambda: _grid(args))


def read_baselines(path: Path) -> pd.DataFrame:
    """An earlier grid.csv for ``--baselines``, checked before any cell runs."""
    if not path.is_file():
        raise ValueError(f"--baselines: no file at {path}")
    earlier = pd.read_csv(path)
    missing = [column for column in COLUMNS if column not in earlier]
    if missing:
        raise ValueError(f"--baselines: {path} is not a size grid's grid.csv: it lacks "
                         f"{', '.join(missing)}")
    return earlier


def with_baselines(frame: pd.DataFrame, earlier: pd.DataFrame, path: Path,
                   ) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` and the rows of ``earlier`` (read from ``path``) of its cells and tasks whose
    methods ``frame`` lacks; those methods, in the file's order. A taken row must describe
    the same task as ``frame``'s rows of its table, repetition and cell."""
    task = ["dataset", "repetition", *CELL]
    earlier = earlier[~earlier["method"].isin(frame["method"].unique())]
    ours = frame.drop_duplicates(task)[[*task, "n_labeled", "n_unlabeled", "pi_true"]]
    joined = earlier.merge(ours, on=task, suffixes=("", "_now"))  # NaN cell keys match NaN
    differs = ((joined["n_labeled"] != joined["n_labeled_now"])
               | (joined["n_unlabeled"] != joined["n_unlabeled_now"])
               | ~np.isclose(joined["pi_true"], joined["pi_true_now"]))
    if differs.any():
        row = joined[differs].iloc[0]
        raise ValueError(f"--baselines: {path} holds another task for {row['dataset']} "
                         f"repetition {row['repetition']} ({row['n_labeled']} labeled and "
                         f"{row['n_unlabeled']} pool rows there, {row['n_labeled_now']} and "
                         f"{row['n_unlabeled_now']} now)")
    methods = list(dict.fromkeys(joined["method"]))
    return pd.concat([frame, joined[COLUMNS]], ignore_index=True), methods


def _grid(args: argparse.Namespace) -> int:
    specs = grid_specs(args)
    earlier = None if args.baselines is None else read_baselines(args.baselines)
    records = [run(spec, progress=False if args.no_progress else None) for spec in specs]
    frame = grid_frame(specs, records)
    methods = list(specs[0].methods)
    if earlier is not None:
        frame, taken = with_baselines(frame, earlier, args.baselines)
        methods += taken
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_output(args.out / "grid.csv") as temporary:
        frame.to_csv(temporary, index=False)
    atomic_write_text(args.out / "grid.md", grid_markdown(frame, methods))
    plot_grid(frame, methods, args.out / "grid.png")
    if len(methods) > 1:
        plot_per_task(frame, methods, args.out / "per_task.png")
    print(f"size_grid: wrote {args.out / 'grid.md'}, {args.out / 'grid.csv'}, "
          f"{args.out / 'grid.png'}, {args.out / 'per_task.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
