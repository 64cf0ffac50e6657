"""``trainer plot RUN``: the curves of ``RUN/metrics.jsonl`` in one PNG.

Panels: training and validation loss; learning rate; gradient norm; validation AUC and
accuracy; validation AUC per π bucket; throughput with the cumulative count of skipped
steps. Dotted lines mark where the phase changes.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from puicl_common.output_paths import save_figure
from trainer.metrics_log import read_metrics


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for record in records:
        value = record.get(key)
        if isinstance(value, (int, float)):
            steps.append(record["step"])
            values.append(float(value))
    return steps, values


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw the run's curves; returns the PNG path (default ``RUN/metrics.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.jsonl"
    if not metrics_path.exists():
        raise FileNotFoundError(
            f"{metrics_path} does not exist: is {run_dir} a run directory of trainer/main.py?"
        )
    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("kind") == "train"]
    val = [r for r in records if r.get("kind") == "val"]
    if not train and not val:
        raise ValueError(f"{metrics_path} holds no train or val records yet")

    fig, axes = plt.subplots(2, 3, figsize=(15, 8), constrained_layout=True)
    ax_loss, ax_lr, ax_grad, ax_auc, ax_pi, ax_skip = axes.ravel()

    ax_loss.plot(*_series(train, "loss"), label="train")
    ax_loss.plot(*_series(val, "loss"), "o-", label="validation (EMA)")
    ax_loss.set_title("cross-entropy on unlabeled rows")
    ax_loss.legend()

    ax_lr.plot(*_series(train, "lr"))
    ax_lr.set_title("learning rate")

    ax_grad.plot(*_series(train, "grad_norm"))
    ax_grad.set_title("gradient norm (before clipping)")
    ax_grad.set_yscale("log")

    ax_auc.plot(*_series(val, "auc"), "o-", label="AUC")
    ax_auc.plot(*_series(val, "accuracy"), "s-", label="accuracy")
    ax_auc.set_title("validation (EMA weights)")
    ax_auc.legend()

    buckets = list(dict.fromkeys(b for r in val for b in r.get("auc_by_pi", {})))
    for bucket in buckets:
        steps = [r["step"] for r in val if r.get("auc_by_pi", {}).get(bucket) is not None]
        values = [r["auc_by_pi"][bucket] for r in val if r.get("auc_by_pi", {}).get(bucket)]
        ax_pi.plot(steps, values, "o-", label=f"π {bucket}")
    ax_pi.set_title("validation AUC per π bucket")
    if buckets:
        ax_pi.legend(fontsize="small")

    ax_skip.plot(*_series(train, "tasks_per_s"))
    ax_skip.set_title("throughput (tasks/s); red: skipped steps, cumulative")
    ax_skipped = ax_skip.twinx()
    ax_skipped.plot(*_series(train, "skipped_total"), color="tab:red")

    phase_changes = [
        b["step"] for a, b in itertools.pairwise(train) if a["phase"] != b["phase"]
    ]
    for ax in axes.ravel():
        ax.set_xlabel("step")
        for step in phase_changes:
            ax.axvline(step, color="grey", linestyle=":", linewidth=1)

    out_path = Path(out) if out is not None else run_dir / "metrics.png"
    fig.suptitle(f"run {run_dir}")  # the path as given: run directories are often named "run"
    # inside the run directory a write follows no link (puicl_common.run_files); elsewhere
    # the --out the user named is written as given
    if out is None:
        save_figure(fig, out_path, dpi=100, inside=run_dir)
        return out_path
    root, folder = Path(os.path.realpath(run_dir)), Path(os.path.realpath(out_path.parent))
    if folder == root or root in folder.parents:
        save_figure(fig, folder / out_path.name, dpi=100, inside=root)
    else:
        save_figure(fig, out_path, dpi=100)
    return out_path
