"""Shared fixtures of the benchmark tests: a small, easy synthetic PU task, and a data
directory with a synthetic Haberman file, and small development suites."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def easy_pu_task(seed: int = 0, n_labeled: int = 60, n_u_pos: int = 120, n_u_neg: int = 120,
                 dim: int = 4, shift: float = 2.5):
    """Positives N(0, I), negatives N(shift·1/√d · 1, I): Bayes AUC ≈ 0.96 at shift 2.5."""
    rng = np.random.default_rng(seed)
    direction = np.ones(dim) / np.sqrt(dim)
    x_l = rng.normal(size=(n_labeled, dim))
    x_up = rng.normal(size=(n_u_pos, dim))
    x_un = rng.normal(size=(n_u_neg, dim)) + shift * direction
    pool = np.vstack([x_up, x_un])
    y_pool = np.array([1] * n_u_pos + [0] * n_u_neg, dtype=np.int8)
    order = rng.permutation(len(pool))
    X = np.vstack([x_l, pool[order]])
    s = np.array([1] * n_labeled + [0] * len(pool), dtype=np.int8)
    return X, s, y_pool[order]


@pytest.fixture()
def data_dir(tmp_path):
    """A data directory with a synthetic file in Haberman's format (3 integers + class)."""
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    (root / "haberman").mkdir(parents=True)
    survived = np.column_stack([rng.integers(30, 60, 150), rng.integers(58, 70, 150),
                                rng.integers(0, 4, 150), np.ones(150, int)])
    died = np.column_stack([rng.integers(50, 80, 60), rng.integers(58, 70, 60),
                            rng.integers(5, 30, 60), np.full(60, 2)])
    rows = np.vstack([survived, died])[rng.permutation(210)]
    text = "\n".join(",".join(str(v) for v in row) for row in rows) + "\n"
    (root / "haberman" / "haberman.data").write_text(text)
    return root


@pytest.fixture(scope="session")
def easy_task():
    return easy_pu_task()


def write_suite_table(folder: Path, slug: str, n_pos: int, n_neg: int, seed: int,
                      with_gaps: bool = True) -> None:
    """One suite table: a noisy signal, a text column and a count, and its ``target``;
    ``with_gaps``: empty text cells (a category of their own) and missing numbers."""
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    frame = pd.DataFrame({
        "signal": rng.normal(size=len(y)) + 1.5 * y,
        "colour": rng.choice(["red", "green", "blue"], size=len(y)),
        "count": rng.integers(0, 5, size=len(y)),
    })
    if with_gaps:
        frame.loc[::7, "colour"] = None
        frame.loc[::11, "signal"] = np.nan
    frame["target"] = y
    frame.to_csv(folder / f"{slug}.csv", index=False)


def write_suite(folder: Path, tables: dict[str, tuple[int, int]],
                with_gaps: bool = True) -> Path:
    """A suite folder with ``tables`` (slug -> positives, negatives) and its manifest."""
    folder.mkdir()
    for seed, (slug, (n_pos, n_neg)) in enumerate(tables.items(), start=1):
        write_suite_table(folder, slug, n_pos, n_neg, seed, with_gaps)
    pd.DataFrame({"slug": list(tables)}).to_csv(folder / "manifest.csv", index=False)
    return folder


@pytest.fixture(scope="session")
def suite_writer():
    """``suite_writer(folder, {slug: (positives, negatives)}, with_gaps=True)`` writes a small
    development suite and returns its folder."""
    return write_suite
