"""Outputs of a benchmark run: per-replicate CSV, Table-1-style markdown, plot, provenance.

* ``results.csv`` — one row per (dataset, repetition, method): task composition, seeds, the
  three metrics, π̂ and its absolute error where the method estimates π, fit+predict seconds.
* ``table.md`` — means over repetitions per dataset and method: AUC | Acc | F1 blocks as in the
  paper's Table 1 (best per dataset and metric in bold, averages in the last row), then the
  mean absolute error of π̂ and the mean fit+predict time per method, then the comparison with
  the paper's Table 1 (ours − paper, per dataset and on average).
* ``auc.png`` — mean AUC per dataset and method (bars) with the paper's PUICL AUC for
  reference.
* ``provenance.json`` — the command, package versions, root seed and seed rule, data files
  with sha256, git commit of the code.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.labeling import SCAR
from benchmark.paper import PAPER_AVERAGES, PAPER_TABLE
from benchmark.protocol import EVERY_ROW, MAX_POSITIVES, TARGET_PI, size_words
from benchmark.runner import RunSpec
from benchmark.suites import Suite, get_suite
from puicl_common.atomic import atomic_output, atomic_write_json, atomic_write_text

METRICS = (("auc", "AUC"), ("accuracy", "Acc"), ("f1", "F1"))
METHOD_LABELS = {"puicl": "PUICL", "ulsif": "uLSIF", "empu": "EMPU", "vpu": "VPU",
                 "tedn": "(TED)^n", "nnpu": "nnPU", "elkan-noto": "Elkan–Noto",
                 "pu-bagging": "PU bagging"}
CSV_COLUMNS = ["dataset", "repetition", "method", "seed", "n_labeled", "n_u_pos", "n_u_neg",
               "pi_true", "pi_hat", "pi_abs_error", "auc", "accuracy", "f1", "fit_predict_s",
               "n_features", "task_sha256"]


def records_frame(records: Sequence[dict[str, Any]], datasets: Sequence[str],
                  methods: Sequence[str], labeling: str = SCAR) -> pd.DataFrame:
    """Records as a DataFrame in Table-1 dataset order, then method order, then repetition.
    A biased ``labeling`` (every record of a run has the run's) adds a last column naming it;
    SCAR adds none, so a SCAR run's results.csv keeps its columns and bytes."""
    frame = pd.DataFrame(list(records), columns=CSV_COLUMNS)
    if labeling != SCAR:
        frame["labeling"] = labeling
    frame["dataset"] = pd.Categorical(frame["dataset"], categories=list(datasets), ordered=True)
    frame["method"] = pd.Categorical(frame["method"], categories=list(methods), ordered=True)
    frame = frame.sort_values(["dataset", "method", "repetition"]).reset_index(drop=True)
    frame["dataset"] = frame["dataset"].astype(str)
    frame["method"] = frame["method"].astype(str)
    return frame


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    with atomic_output(path) as temporary:
        frame.to_csv(temporary, index=False, float_format="%.6g")


def _means(frame: pd.DataFrame, metric: str, datasets, methods) -> pd.DataFrame:
    table = frame.pivot_table(index="dataset", columns="method", values=metric, aggfunc="mean",
                              observed=True)
    return table.reindex(index=list(datasets), columns=list(methods))


def _fmt(value: float, bold: bool) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    text = f"{value:.3f}"
    return f"**{text}**" if bold else text


def _bold_row(values: Sequence[float]) -> list[str]:
    finite = [round(v, 3) for v in values if v is not None and np.isfinite(v)]
    best = max(finite) if finite else None
    return [_fmt(v, best is not None and np.isfinite(v) and round(v, 3) == best) for v in values]


def table_markdown(frame: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str],
                   suite: Suite | None = None) -> str:
    """The Table-1-style block: AUC | Acc | F1, best per dataset and metric in bold."""
    suite = suite or get_suite("benchmark")
    means = {m: _means(frame, m, datasets, methods) for m, _ in METRICS}
    header = ["Dataset"]
    for _, label in METRICS:
        header += [f"{label} {METHOD_LABELS.get(m, m)}" for m in methods]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for slug in [*datasets, "__average__"]:
        name = "**Average**" if slug == "__average__" else suite.display_name(slug)
        cells = [name]
        for metric, _ in METRICS:
            table = means[metric]
            row = table.mean(axis=0) if slug == "__average__" else table.loc[slug]
            cells += _bold_row([float(row[m]) for m in methods])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def extras_markdown(frame: pd.DataFrame, methods: Sequence[str]) -> str:
    """π̂ error and timing per method."""
    lines = ["| method | replicates | mean abs(π̂ − π) | mean fit+predict s | max s |",
             "|---|---|---|---|---|"]
    for method in methods:
        part = frame[frame["method"] == method]
        errors = pd.to_numeric(part["pi_abs_error"], errors="coerce").dropna()
        mae = f"{errors.mean():.3f}" if len(errors) else "–"
        lines.append(
            f"| {METHOD_LABELS.get(method, method)} | {len(part)} | {mae} | "
            f"{part['fit_predict_s'].mean():.2f} | {part['fit_predict_s'].max():.2f} |"
        )
    return "\n".join(lines)


def comparison_markdown(frame: pd.DataFrame, datasets: Sequence[str],
                        methods: Sequence[str], threshold: float = 0.03) -> str:
    """Ours vs the paper's Table 1 per dataset and metric, and the averages (Δ = ours − paper)."""
    out = []
    for metric, label in METRICS:
        common = [m for m in methods if m in PAPER_TABLE[metric]]
        if not common:
            continue
        means = _means(frame, metric, datasets, common)
        header = ["Dataset"]
        for m in common:
            header += [f"{METHOD_LABELS[m]} ours", "paper", "Δ"]
        lines = [f"#### {label}", "", "| " + " | ".join(header) + " |",
                 "|" + "---|" * len(header)]
        for slug in datasets:
            cells = [get_suite("benchmark").display_name(slug)]
            for m in common:
                ours, paper = float(means.loc[slug, m]), PAPER_TABLE[metric][m].get(slug)
                cells += [_fmt(ours, False), _fmt(paper, False),
                          f"{ours - paper:+.3f}" if paper is not None else "–"]
            lines.append("| " + " | ".join(cells) + " |")
        cells = ["**Average**"]
        for m in common:
            ours = float(means[m].mean())
            paper_rows = [PAPER_TABLE[metric][m][s] for s in datasets]
            paper = float(np.mean(paper_rows))
            flag = " ⚑" if abs(ours - paper) > threshold else ""
            cells += [_fmt(ours, False), _fmt(paper, False), f"{ours - paper:+.3f}{flag}"]
        lines.append("| " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    note = (f"Δ = ours − paper; ⚑ marks an average that differs by more than {threshold}. "
            "The paper's averages over all 20 datasets: "
            + "; ".join(f"{label} " + ", ".join(f"{METHOD_LABELS[m]} {v:.3f}"
                                                for m, v in PAPER_AVERAGES[metric].items())
                        for metric, label in METRICS) + ".")
    return "\n\n".join([*out, note])


def plot_auc(frame: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str],
             path: Path, target_pi: float = TARGET_PI, suite: Suite | None = None,
             labeling: str = SCAR, max_positives: int = MAX_POSITIVES) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = _means(frame, "auc", datasets, methods)
    suite = suite or get_suite("benchmark")
    names = [suite.display_name(s) for s in datasets] + ["Average"]
    x = np.arange(len(names))
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(names) + 2), 4.8), dpi=110)
    for i, method in enumerate(methods):
        values = [*means[method].to_numpy(), means[method].mean()]
        ax.bar(x + (i - (len(methods) - 1) / 2) * width, values, width,
               label=METHOD_LABELS.get(method, method))
    # the paper's marks where its tasks are these
    if _paper_tasks(suite, target_pi, labeling, max_positives):
        paper = [PAPER_TABLE["auc"]["puicl"].get(s, np.nan) for s in datasets]
        paper.append(float(np.nanmean(paper)) if datasets else np.nan)
        ax.scatter(x, paper, marker="_", s=180, color="black", zorder=3,
                   label="PUICL (paper Table 1)")
    ax.set_xticks(x, names, rotation=45, ha="right")
    ax.set_ylim(0.4, 1.02)
    ax.set_ylabel("mean AUC over repetitions")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    what = "PU benchmark (paper §6)" if suite.in_paper else f"{suite.name} suite"
    biased = "" if labeling == SCAR else f", labeling {labeling}"
    ax.set_title(f"{what}, π = {target_pi:g}{biased}: AUC on the unlabeled pool")
    fig.tight_layout()
    with atomic_output(path, suffix=".png") as temporary:
        fig.savefig(temporary)
    plt.close(fig)


def _paper_tasks(suite: Suite, target_pi: float, labeling: str,
                 max_positives: int = MAX_POSITIVES) -> bool:
    """Are these the tasks of the paper's Table 1 (its 20 datasets, π = 0.5, SCAR, at most 600
    positives; §6.1)?"""
    return (suite.in_paper and target_pi == TARGET_PI and labeling == SCAR
            and max_positives == MAX_POSITIVES)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("puicl", "numpy", "scipy", "pandas", "scikit-learn", "torch", "joblib",
                    "pulearn"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _git_commit() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=10, check=False)
        commit = result.stdout.strip()
        if not commit:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "benchmark"],
                               capture_output=True, text=True, timeout=10, check=False,
                               cwd=Path(__file__).resolve().parent.parent).stdout.strip()
        return commit + (" (benchmark/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _method_settings(spec: RunSpec) -> dict[str, Any]:
    from benchmark.methods import make_method, method_settings

    return {
        name: method_settings(make_method(name, weights=spec.weights,
                                          overrides=spec.method_overrides.get(name)))
        for name in spec.methods
    }


def _imported_counts(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for record in records:
        if record.get("imported_from"):
            per_method = counts.setdefault(record["imported_from"], {})
            per_method[record["method"]] = per_method.get(record["method"], 0) + 1
    return counts


def provenance(spec: RunSpec, argv: Sequence[str],
               records: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    suite = get_suite(spec.suite)
    root = suite.root(spec.data_dir)
    files = {}
    for slug in spec.datasets:
        for rel in suite.files(slug):
            files[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
    return {
        "command": " ".join(["puicl-bench", *argv]),
        "suite": spec.suite,
        "methods": list(spec.methods),
        "datasets": list(spec.datasets),
        "repeats": spec.repeats,
        "root_seed": spec.seed,
        "target_pi": spec.target_pi,
        "max_positives": spec.max_positives,
        "seed_rule": (
            "task: numpy SeedSequence([root_seed, sha256(dataset)[:4] as uint32 LE, repetition]);"
            " method: SeedSequence([root_seed, dataset key, repetition, sha256(method)[:4]])"
            ".generate_state(1) — the per-replicate value is the 'seed' column of results.csv"
            + ("" if spec.labeling == SCAR else
               "; labeled positives: SeedSequence([root_seed, dataset key, repetition, "
               "sha256('labeling')[:4], sha256(labeling)[:4]])")
        ),
        "labeling": spec.labeling,
        "method_overrides": spec.method_overrides,
        "method_settings": _method_settings(spec),
        "weights": None if spec.weights is None else str(spec.weights),
        # replicates taken from a published results.csv (puicl-bench --import-results)
        "imported_replicates": _imported_counts(records),
        "jobs": spec.jobs,
        "versions": _versions(),
        "git_commit": _git_commit(),
        "data_files_sha256": files,
    }


def write_reports(spec: RunSpec, records: Sequence[dict[str, Any]], argv: Sequence[str]) -> dict:
    """Write results.csv, table.md, auc.png and provenance.json into ``spec.out``."""
    spec.out.mkdir(parents=True, exist_ok=True)
    frame = records_frame(records, spec.datasets, spec.methods, spec.labeling)
    paths = {
        "csv": spec.out / "results.csv",
        "table": spec.out / "table.md",
        "plot": spec.out / "auc.png",
        "provenance": spec.out / "provenance.json",
    }
    write_csv(frame, paths["csv"])
    suite = get_suite(spec.suite)
    biased = "" if spec.labeling == SCAR else f", labeling {spec.labeling}"
    size = ("" if spec.max_positives == MAX_POSITIVES else
            ", every positive of each table" if spec.max_positives >= EVERY_ROW else
            f", at most {size_words(spec.max_positives)} positives per task")
    blocks = [
        f"### Mean over {spec.repeats} repetitions at π = {spec.target_pi:g}{biased}{size} (best "
        "per dataset and metric in bold)",
        f"π: the target negative share of each unlabeled pool; realized on average: "
        f"{frame['pi_true'].mean():.3f} (a dataset with too few negatives gives less).",
        *([] if spec.labeling == SCAR else [
            f"Labeling {spec.labeling}: the labeled positives are drawn with probabilities ∝ a "
            "propensity of their features, not uniformly as in the paper (docs/benchmark.md, "
            "\"Biased labeling\")."]),
        table_markdown(frame, spec.datasets, spec.methods, suite),
        "### Class-prior estimate and cost",
        extras_markdown(frame, spec.methods),
    ]
    # the paper's Table 1 holds its 20 datasets with pools of half negatives, uniformly drawn
    # labeled positives and at most 600 positives a task (§6.1): other tables, another π, a
    # biased labeling or another cap are other tasks, so its figures are neither compared nor
    # drawn
    if _paper_tasks(suite, spec.target_pi, spec.labeling, spec.max_positives):
        blocks += ["### Against the paper's Table 1",
                   comparison_markdown(frame, spec.datasets, spec.methods)]
    elif suite.in_paper and spec.labeling != SCAR:
        blocks.append("The paper's Table 1 labels a uniform draw of the positives (§6.1), so "
                      "it is not compared here.")
    elif suite.in_paper and spec.max_positives != MAX_POSITIVES:
        blocks.append(f"The paper's Table 1 draws at most {MAX_POSITIVES} positives a task "
                      "(§6.1), so it is not compared here.")
    elif suite.in_paper:
        blocks.append(f"The paper's Table 1 is at π = {TARGET_PI:g} (§6.1), so it is not "
                      "compared here.")
    atomic_write_text(paths["table"], "\n\n".join(blocks) + "\n")
    plot_auc(frame, spec.datasets, spec.methods, paths["plot"], target_pi=spec.target_pi,
             suite=suite, labeling=spec.labeling, max_positives=spec.max_positives)
    atomic_write_json(paths["provenance"], provenance(spec, argv, records))
    return paths
