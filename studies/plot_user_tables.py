"""The generated yardstick, table by table, as a figure: for every table of each size cell, the
default's pool AUC minus each alternative's (the PU-bagging and Elkan-Noto adapters, the model
alone, each portfolio member alone), so that the tables where the default is more than 0.01
behind one of them stand out (docs/user_tables.md). Read off the CSV that
``python -m studies.user_yardstick report --csv`` writes.

    python -m studies.user_yardstick report --out results/user --csv results/user/report.csv
    python -m studies.plot_user_tables --csv results/user/report.csv \\
        --out docs/user_tables/decision.png --title "48 decision tables"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from puicl_common.atomic import atomic_write_bytes
from studies.user_yardstick import BAR

# each alternative a user has, as the report names its column: its label and marker
ALTERNATIVES: dict[str, tuple[str, str]] = {
    "pu-bagging": ("PU-bagging adapter", "o"),
    "elkan-noto": ("Elkan-Noto adapter", "D"),
    "model": ("the model alone", "s"),
    "logistic": ("logistic member alone", "^"),
    "bagged": ("forest bags alone", "v"),
}
CELLS = ("small:count", "medium:share", "large:count", "large:share")
REQUIRED = ("table", "cell", "default", "best_alternative")


def read_report(path: Path) -> pd.DataFrame:
    """The report's rows, one per table; a CSV without the columns a figure needs is refused
    in one line that names them."""
    frame = pd.read_csv(path)
    missing = [column for column in REQUIRED if column not in frame]
    if missing:
        raise ValueError(f"{path}: not a report of studies.user_yardstick (no column "
                         f"{', '.join(missing)})")
    if not any(method in frame for method in ALTERNATIVES):
        raise ValueError(f"{path}: no alternative's AUC to compare the default with")
    return frame


def short_name(table: str) -> str:
    """A table's name without its draw (``-p<percent>-s<seed>``)."""
    return table.rsplit("-p", 1)[0]


def gap(frame: pd.DataFrame) -> pd.Series:
    """The default's AUC minus the best alternative's, per table."""
    return frame["default"] - frame["best_alternative"]


def behind(frame: pd.DataFrame) -> pd.Series:
    """Whether the default is more than the bar below the best alternative, per table."""
    return gap(frame) < -BAR


def per_table_figure(frame: pd.DataFrame, title: str) -> Any:
    """One panel per size cell, one row per table (the furthest behind at the bottom): each
    alternative's marker at the default's AUC minus its own; left of the shaded line, the
    default trails it by more than the bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [cell for cell in CELLS if cell in set(frame["cell"])]
    cells += sorted(set(frame["cell"]) - set(cells))
    rows = max(int((frame["cell"] == cell).sum()) for cell in cells)
    fig, axes = plt.subplots(len(cells), 1, figsize=(8.5, 1.0 + 0.28 * rows * len(cells)),
                             sharex=True, squeeze=False)
    differences = np.concatenate([frame["default"] - frame[m] for m in ALTERNATIVES
                                  if m in frame])
    low = min(-2 * BAR, float(np.nanmin(differences)) - 0.01)
    for ax, cell in zip(axes[:, 0], cells, strict=True):
        part = frame[frame["cell"] == cell]
        part = part.iloc[np.argsort(gap(part).to_numpy(), kind="stable")]
        y = np.arange(len(part))
        ax.axvspan(low, -BAR, color="0.92", zorder=0)
        ax.axvline(0.0, color="0.4", linewidth=0.8)
        for method, (label, marker) in ALTERNATIVES.items():
            if method in part:
                ax.scatter(part["default"] - part[method], y, marker=marker, s=22,
                           label=label, alpha=0.85)
        ax.set_yticks(y, [short_name(name) for name in part["table"]], fontsize=7)
        ax.set_ylim(-0.7, rows - 0.3)
        within = int((~behind(part)).sum())
        ax.set_title(f"{cell}: within {BAR:g} of the best alternative on {within} of "
                     f"{len(part)}", fontsize=9)
    axes[-1, 0].set_xlim(left=low)
    axes[-1, 0].set_xlabel("the default's pool AUC minus the alternative's (shaded: more than "
                           f"{BAR:g} behind)")
    axes[0, 0].legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.plot_user_tables",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, required=True, help="report --csv's file")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--title", default="the default against every alternative, per table")
    args = parser.parse_args(argv)
    try:
        frame = read_report(args.csv)
    except (OSError, ValueError) as error:
        print(f"plot_user_tables: {error}", file=sys.stderr)
        return 2
    import io

    figure = per_table_figure(frame, args.title)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out, buffer.getvalue())
    print(f"wrote {args.out}: {len(frame)} tables, {int(behind(frame).sum())} more than "
          f"{BAR:g} behind the best alternative")
    return 0


if __name__ == "__main__":
    sys.exit(main())
