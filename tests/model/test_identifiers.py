"""Identifier columns (whole numbers or text, a different value in nearly every row) are found
from their values alone and dropped with a warning naming them, in any row layout; the same
table laid out as one table or as positives then unlabeled rows gives the same bytes."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.identifiers import (
    IDENTIFIER_MIN_ROWS,
    IDENTIFIER_SHARE,
    identifier_reason,
)
from puicl_model.estimator.preprocessing import TablePreprocessor

N_ROWS = 90


def identifiers(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A column of identifiers: counting up by one, the same shuffled, or hashes (48 bits:
    a float64 array, as numpy makes of a table with fractions, holds them exactly)."""
    counting = np.arange(5000, 5000 + N_ROWS)
    if kind == "consecutive":
        return counting
    if kind == "shuffled":
        return rng.permutation(counting)
    digests = [hashlib.sha256(str(i).encode()).digest()[:8] for i in counting]
    return np.array([int.from_bytes(d, "little") >> 16 for d in digests], dtype=np.int64)


def pu_frame(kind: str, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """A table with an identifier column, its labeled rows scattered among the others."""
    frame = pd.DataFrame({"customer_id": identifiers(kind, rng),
                          "x1": rng.normal(size=N_ROWS), "x2": rng.normal(size=N_ROWS),
                          "visits": rng.integers(0, 6, size=N_ROWS)})
    s = np.zeros(N_ROWS, dtype=np.int64)
    s[rng.choice(N_ROWS, 30, replace=False)] = 1
    return frame, s


def labeled_first(X, s: np.ndarray):
    """The same table laid out as the two-file layout gives it: positives, then the pool."""
    order = np.r_[np.flatnonzero(s == 1), np.flatnonzero(s == 0)]
    rows = X.iloc[order].reset_index(drop=True) if isinstance(X, pd.DataFrame) else X[order]
    return rows, s[order]


@pytest.mark.parametrize("kind", ["consecutive", "shuffled", "hashed"])
@pytest.mark.parametrize("container", ["DataFrame", "numpy"])
def test_an_identifier_is_dropped_in_any_layout_with_the_same_scores(
        kind, container, small_weights, rng) -> None:
    frame, s = pu_frame(kind, rng)
    X = frame if container == "DataFrame" else frame.to_numpy()
    name = "customer_id" if container == "DataFrame" else "0"
    results = []
    for table, labels in (
        (X, s),  # one table, labeled rows among the others
        labeled_first(X, s),  # positives then unlabeled rows
    ):
        note = rf"dropped as identifiers .*'{name}' \({N_ROWS} different whole numbers in"
        with pytest.warns(UserWarning, match=note):
            clf = PUICLClassifier(weights=small_weights, random_state=0).fit(table, labels)
        assert clf.preprocessor_.dropped_reasons_ == {
            name: f"an identifier: {N_ROWS} different whole numbers in {N_ROWS} rows"}
        pool = table[labels == 0]
        results.append((clf.predict_proba(pool), clf.estimate_class_prior()))
    (first, pi_first), (second, pi_second) = results
    assert first.tobytes() == second.tobytes()
    assert pi_first == pi_second


def test_keep_columns_keeps_an_identifier_as_a_feature(small_weights, rng) -> None:
    frame, s = pu_frame("shuffled", rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no note: the user asked for the column
        kept = PUICLClassifier(weights=small_weights, keep_columns=["customer_id"]).fit(frame, s)
    assert "customer_id" in kept.preprocessor_.kept_features_
    numbered = PUICLClassifier(weights=small_weights, keep_columns=[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        numbered.fit(frame.to_numpy(), s)
    assert numbered.preprocessor_.dropped_features_ == []
    with pytest.raises(ValueError, match=r"keep_columns names no column of X: \['id'\]"):
        PUICLClassifier(weights=small_weights, keep_columns=["id"]).fit(frame, s)


def test_text_identifiers_and_nearly_distinct_ones_are_dropped() -> None:
    rows = 2000
    rng = np.random.default_rng(0)
    names = np.array([f"user-{i:05d}" for i in rng.permutation(rows)], dtype=object)
    repeated = np.arange(rows)
    repeated[:1] = 1  # one customer met twice: 1,999 values in 2,000 rows, above the share
    X = pd.DataFrame({"name": names, "customer": repeated, "x": rng.normal(size=rows)})
    with pytest.warns(UserWarning, match="dropped as identifiers"):
        pre = TablePreprocessor().fit(X)
    assert pre.dropped_reasons_ == {
        "name": "an identifier: 2,000 different values in 2,000 rows",
        "customer": "an identifier: 1,999 different whole numbers in 2,000 rows",
    }
    assert IDENTIFIER_SHARE * 2000 <= 1999
    # 64-bit hashes, told apart exactly although float64 cannot hold them
    hashes = np.array([2**62 + 2 * i for i in range(rows)], dtype=np.int64)
    reason = identifier_reason(hashes, hashes.astype(np.float64))
    assert reason == "an identifier: 2,000 different whole numbers in 2,000 rows"


def test_what_is_not_an_identifier() -> None:
    rng = np.random.default_rng(1)
    rows = 200
    # fractions all distinct, whole numbers that repeat, dates, few rows, booleans
    assert identifier_reason(rng.normal(size=rows), rng.normal(size=rows)) is None
    counts = rng.integers(0, 50, size=rows)
    assert identifier_reason(counts, counts.astype(np.float64)) is None
    few = np.arange(IDENTIFIER_MIN_ROWS - 1)
    assert identifier_reason(few, few.astype(np.float64)) is None
    flags = rng.integers(0, 2, size=rows).astype(bool)
    assert identifier_reason(flags, flags.astype(np.float64)) is None
    # a float column of whole numbers (an id column with a gap, as pandas reads it) is one
    ids = np.arange(rows, dtype=np.float64)
    ids[3] = np.nan
    assert identifier_reason(ids, ids) == "an identifier: 199 different whole numbers in 199 rows"
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.permutation(rows), unit="D")
    X = pd.DataFrame({"when": days, "x": rng.normal(size=rows)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pre = TablePreprocessor().fit(X)
    assert pre.dropped_features_ == []
