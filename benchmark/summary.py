"""A suite's figure over several pool compositions: the yardstick every decision is read from.

The figure of a method is its mean AUC over tables, repetitions and target negative shares π
(by default 0.2, 0.5 and 0.8), with a standard error across tables: each table's mean over its
repetitions and π values is one observation, so the error says how much the figure would move
with another draw of tables of the same kind. A difference between two methods is paired by
table, and its standard error is that of the per-table differences.

Written next to the per-π reports of a run:

* ``per_table.csv``: one row per (table, method, π): the mean AUC, accuracy, F1 and π̂ error
  over repetitions, and the realized π;
* ``summary.md``: per method, the mean AUC at each π, the suite's figure ± its standard error,
  mean accuracy, F1 and |π̂ − π| at each π, and each method's paired difference from the first;
* ``summary.png``: mean AUC against π per method, with standard-error bars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from puicl_common.atomic import atomic_output, atomic_write_text

PER_TABLE_COLUMNS = ["dataset", "method", "pi_target", "pi_true", "repetitions", "auc",
                     "accuracy", "f1", "pi_abs_error"]


def per_table_frame(frames: Mapping[float, pd.DataFrame]) -> pd.DataFrame:
    """Means over repetitions per (table, method, target π) of the runs' results frames."""
    parts = []
    for pi, frame in frames.items():
        grouped = frame.assign(pi_abs_error=pd.to_numeric(frame["pi_abs_error"],
                                                          errors="coerce"))
        grouped = grouped.groupby(["dataset", "method"], sort=False)
        means = grouped[["pi_true", "auc", "accuracy", "f1", "pi_abs_error"]].mean()
        means["repetitions"] = grouped.size()
        means = means.reset_index()
        means["pi_target"] = pi
        parts.append(means)
    return pd.concat(parts, ignore_index=True)[PER_TABLE_COLUMNS]


def suite_figure(per_table: pd.DataFrame, method: str, metric: str = "auc") -> tuple[float, float]:
    """(mean, standard error across tables) of a metric over tables, π values and repetitions."""
    part = per_table[per_table["method"] == method]
    by_table = part.groupby("dataset")[metric].mean()
    return float(by_table.mean()), _standard_error(by_table.to_numpy())


def paired_difference(per_table: pd.DataFrame, method: str, reference: str,
                      metric: str = "auc") -> tuple[float, float]:
    """(mean, standard error) over tables of method − reference, each averaged over π."""
    pivot = per_table.pivot_table(index="dataset", columns="method", values=metric,
                                  aggfunc="mean")
    diff = (pivot[method] - pivot[reference]).dropna()
    return float(diff.mean()), _standard_error(diff.to_numpy())


def _standard_error(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float("nan")
    return float(values.std(ddof=1) / np.sqrt(len(values)))


def summary_markdown(per_table: pd.DataFrame, methods: Sequence[str],
                     labels: Mapping[str, str] | None = None, pi_hat: bool = True) -> str:
    """The suite's table: AUC per π, the figure ± SE, accuracy, F1, π̂ error (unless
    ``pi_hat`` is False), Δ from the first. A metric (or the realized π) missing from
    ``per_table`` is left out of the table."""
    labels = labels or {}
    metrics = [metric for metric in (("accuracy", "f1", "pi_abs_error") if pi_hat
                                     else ("accuracy", "f1")) if metric in per_table.columns]
    pis = sorted(per_table["pi_target"].unique())
    n_tables = per_table["dataset"].nunique()
    reps = sorted(per_table["repetitions"].unique())
    reference = labels.get(methods[0], methods[0])
    names = {"accuracy": "Acc", "f1": "F1", "pi_abs_error": "abs(π̂−π)"}
    header = (["method"] + [f"AUC π={p:g}" for p in pis] + ["**AUC mean ± SE**"]
              + [f"{names[metric]} π={p:g}" for metric in metrics for p in pis]
              + [f"Δ AUC vs {reference}"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method in methods:
        part = per_table[per_table["method"] == method]
        by_pi = part.groupby("pi_target")[["auc", *metrics]].mean()
        mean, se = suite_figure(per_table, method)
        cells = [labels.get(method, method)]
        cells += [_cell(by_pi["auc"].get(p)) for p in pis]
        cells.append(f"**{mean:.4f} ± {se:.4f}**")
        for metric in metrics:
            cells += [_cell(by_pi[metric].get(p), digits=3) for p in pis]
        if method == methods[0]:
            cells.append("–")
        else:
            diff, diff_se = paired_difference(per_table, method, methods[0])
            cells.append(f"{diff:+.4f} ± {diff_se:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    note = (f"{n_tables} tables, {'/'.join(str(r) for r in reps)} repetition(s) per table and "
            f"π. SE: standard error across tables of each table's mean over repetitions and π; "
            f"Δ: paired by table.")
    if "pi_true" in per_table.columns:
        realized = per_table.groupby("pi_target")["pi_true"].mean()
        note += (" Realized π on average: "
                 + ", ".join(f"{realized[p]:.3f} at {p:g}" for p in pis)
                 + " (a table with too few negatives gives less).")
    return "\n".join(lines) + "\n\n" + note


def _cell(value: float | None, digits: int = 4) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    return f"{value:.{digits}f}"


def plot_summary(per_table: pd.DataFrame, methods: Sequence[str], path: Path,
                 labels: Mapping[str, str] | None = None, title: str = "") -> None:
    """Mean AUC against π per method, with standard-error bars across tables."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = labels or {}
    pis = sorted(per_table["pi_target"].unique())
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    for method in methods:
        part = per_table[per_table["method"] == method]
        grouped = part.groupby("pi_target")["auc"]
        means = [grouped.get_group(p).mean() for p in pis]
        errors = [_standard_error(grouped.get_group(p).to_numpy()) for p in pis]
        ax.errorbar(pis, means, yerr=errors, marker="o", capsize=3,
                    label=labels.get(method, method))
    ax.set_xticks(pis)
    ax.set_xlabel("π (negative share of the unlabeled pool)")
    ax.set_ylabel("mean AUC over tables (± SE)")
    ax.set_title(title or "AUC on the unlabeled pool")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    with atomic_output(path, suffix=".png") as temporary:
        fig.savefig(temporary)
    plt.close(fig)


def write_summary(out: Path, frames: Mapping[float, pd.DataFrame], methods: Sequence[str],
                  suite_label: str) -> dict[str, Path]:
    """per_table.csv, summary.md and summary.png of a run over several π, in ``out``."""
    per_table = per_table_frame(frames)
    paths = {"per_table": out / "per_table.csv", "summary": out / "summary.md",
             "summary_plot": out / "summary.png"}
    with atomic_output(paths["per_table"]) as temporary:
        per_table.to_csv(temporary, index=False, float_format="%.6g")
    text = (f"### {suite_label}: mean over tables, repetitions and π\n\n"
            + summary_markdown(per_table, methods) + "\n")
    atomic_write_text(paths["summary"], text)
    plot_summary(per_table, methods, paths["summary_plot"], title=suite_label)
    return paths
