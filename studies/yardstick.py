"""A yardstick where the model is strong: the default, the model alone and the baselines, per
task, on one cell of the development suite.

Reads two size-grid runs of the same cell and replicates (``benchmark/size_grid.py``): one of
the classifier's defaults with the baselines, one of the model alone (``portfolio: none``), and
writes, per table and repetition, the AUC of the default, of the model alone, of each baseline
and of the per-task best baseline (the better baseline on that task), with seconds; then prints
the summary: mean AUCs, default − model alone with its standard errors (over tables, and over
repetitions: the seed noise), the tables where the default is below the model alone, the share
of tasks more than :data:`BEHIND_BY` behind the per-task best baseline, and the tables where
the model alone leads the baselines by more than 0.02 and 0.05, with default − model alone on
them.

Usage (docs/decisions.md, "A portfolio chosen per table")::

    printf 'puicl:\\n  portfolio: none\\n' > model_alone.yaml
    python -m benchmark.size_grid --out results/yard/default --cells 600:0.2 \\
        --methods puicl,elkan-noto,pu-bagging --repeats 12 --jobs 2
    python -m benchmark.size_grid --out results/yard/alone --cells 600:0.2 --methods puicl \\
        --method-config model_alone.yaml --repeats 12 --jobs 2
    python -m studies.yardstick --default results/yard/default/grid.csv \\
        --alone results/yard/alone/grid.csv --out results/yard/per_task.csv
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.size_grid import BEHIND_BY

# the model's lead over the per-task best baseline that counts as clear, and as large
LEADS_BY = (0.02, 0.05)
KEY = ["dataset", "repetition"]


def per_task(default: pd.DataFrame, alone: pd.DataFrame) -> pd.DataFrame:
    """One row per (table, repetition) present in both runs: ``default``, ``alone``, each
    baseline's AUC, ``best_baseline`` (the better on that task) and the seconds of both
    classifiers. Refuses runs of different cells or tasks (sizes or realized π)."""
    for name, frame in (("default", default), ("alone", alone)):
        cells = frame[["max_positives", "pi_target", "label_frequency"]].drop_duplicates()
        if len(cells) != 1:
            raise ValueError(f"the {name} run holds {len(cells)} cells; give one")
    ours = default[default["method"] == "puicl"].set_index(KEY)
    model = alone[alone["method"] == "puicl"].set_index(KEY)
    shape = ["n_labeled", "n_unlabeled", "pi_true"]
    both = ours.index.intersection(model.index)
    if not np.allclose(ours.loc[both, shape].to_numpy(float),
                       model.loc[both, shape].to_numpy(float)):
        raise ValueError("the two runs hold different tasks (sizes or realized π differ)")
    baselines = (default[default["method"] != "puicl"]
                 .pivot_table(index=KEY, columns="method", values="auc"))
    if baselines.empty:
        raise ValueError("the default run holds no baseline")
    frame = pd.DataFrame({
        **{column: ours.loc[both, column] for column in shape},
        "default": ours.loc[both, "auc"], "alone": model.loc[both, "auc"],
    }).join(baselines, how="inner")
    frame["best_baseline"] = frame[list(baselines.columns)].max(axis=1)
    frame["default_s"] = ours.loc[frame.index, "fit_predict_s"]
    frame["alone_s"] = model.loc[frame.index, "fit_predict_s"]
    return frame.reset_index().sort_values(KEY, ignore_index=True)


def paired(frame: pd.DataFrame, a: str, b: str) -> tuple[float, float, float]:
    """Mean of ``a − b`` over the tables (each table the mean of its repetitions), its SE
    over the tables, and its SE over the repetitions (the suite's mean difference per
    repetition; NaN with one repetition): the seed noise."""
    diff = frame.assign(d=frame[a] - frame[b])
    by_table = diff.groupby("dataset")["d"].mean()
    by_rep = diff.groupby("repetition")["d"].mean()
    se_tables = float(by_table.std(ddof=1) / np.sqrt(len(by_table)))
    se_seed = (float(by_rep.std(ddof=1) / np.sqrt(len(by_rep))) if len(by_rep) > 1
               else float("nan"))
    return float(by_table.mean()), se_tables, se_seed


def summary(frame: pd.DataFrame) -> dict[str, float]:
    """The yardstick's figures (every mean over tables of the repetitions' mean)."""
    tables = frame.groupby("dataset")[["default", "alone", "best_baseline", "default_s",
                                       "alone_s"]].mean()
    lead = tables["alone"] - tables["best_baseline"]
    # the seed noise of one table's difference: SE over its repetitions
    d = frame.assign(d=frame["default"] - frame["alone"]).groupby("dataset")["d"]
    se_table = d.std(ddof=1) / np.sqrt(d.count())
    out: dict[str, float] = {
        "tables": len(tables), "repetitions": frame["repetition"].nunique(),
        "tasks": len(frame),
        **{f"mean_{c}": float(tables[c].mean()) for c in ("default", "alone", "best_baseline")},
    }
    for a, b in (("default", "alone"), ("default", "best_baseline"),
                 ("alone", "best_baseline")):
        mean, se_tables, se_seed = paired(frame, a, b)
        out |= {f"{a}-{b}": mean, f"{a}-{b}_se_tables": se_tables,
                f"{a}-{b}_se_seed": se_seed}
    out["tables_default_below_alone"] = int((d.mean() < 0).sum())
    out["tables_default_below_alone_2se"] = int((d.mean() < -2 * se_table).sum())
    for c in ("default", "alone"):
        out[f"share_tasks_{c}_behind"] = float(
            (frame[c] < frame["best_baseline"] - BEHIND_BY).mean())
    for by in LEADS_BY:
        strong = lead > by
        out[f"tables_alone_leads_{by:g}"] = int(strong.sum())
        # the default on those tables (chosen on the model's own AUC: a bias towards it)
        gap = d.mean()[strong]
        out[f"default-alone_where_leads_{by:g}"] = float(gap.mean()) if len(gap) else np.nan
        out[f"default-alone_where_leads_{by:g}_se_tables"] = (
            float(gap.std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else np.nan)
    out["seconds_default"] = float(frame["default_s"].mean())
    out["seconds_alone"] = float(frame["alone_s"].mean())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.yardstick", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("--default", type=Path, required=True,
                        help="grid.csv of the defaults with the baselines")
    parser.add_argument("--alone", type=Path, required=True,
                        help="grid.csv of the model alone (partner: none), same cell")
    parser.add_argument("--out", type=Path, default=None, help="per-task CSV to write")
    args = parser.parse_args(argv)
    frame = per_task(pd.read_csv(args.default), pd.read_csv(args.alone))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False, float_format="%.6g")
    for key, value in summary(frame).items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    tables = frame.groupby("dataset")[["default", "alone", "best_baseline"]].mean()
    tables["alone-best"] = tables["alone"] - tables["best_baseline"]
    tables["default-alone"] = tables["default"] - tables["alone"]
    print(tables.sort_values("alone-best", ascending=False).round(4).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
