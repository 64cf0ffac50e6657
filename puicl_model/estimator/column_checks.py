"""Checks over a table's columns as :class:`~puicl_model.estimator.preprocessing.TablePreprocessor`
reads them: a column that tells labeled from unlabeled rows by itself (split by ``s``), missing
values that fall apart between the two, stray words in a column of numbers, text read as
numbers or dates (and what is said of it), and the moments that scale the features.

Why apart from the encoder: each is a question about the table, asked once in ``fit``, whose
answer is a warning or a dropped column; the encoder only applies what they decide.
"""

from __future__ import annotations

import warnings

import numpy as np

from puicl_model.estimator.column_encoding import ColumnEncoding, category_key
from puicl_model.estimator.columns import is_missing, numbers_and_text
from puicl_model.estimator.text_readings import NUMBERS, STRAY_SHARE, TextTally, read_text

__all__ = ["ReadingNotes", "feature_moments", "read_text_column", "split_by_s", "stray_text",
           "warn_if_missing_apart"]

# a text column at least this share of whose present entries are numbers is "mostly numbers":
# its other entries are stray words that turn the column into categories, said in a warning
_MOSTLY_NUMBERS = 0.5


def stray_text(name: str, values: np.ndarray) -> str | None:
    """The warning's description of a text column made mostly of numbers ("'c' (80 % numbers;
    text 'x' ×12)"), or None for a column of words."""
    share, text = numbers_and_text(values)
    if share < _MOSTLY_NUMBERS:
        return None
    common = sorted(text.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{word!r} ×{count}" for word, count in common[:3])
    more = f" and {len(common) - 3} more" if len(common) > 3 else ""
    return f"{name!r} ({share:.0%} numbers; text {shown}{more})"


def feature_moments(kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard deviation, prescale) of each kept feature: the feature is scaled as
    ``(x / prescale - mean) / std``.

    The prescale is 1 (an exact no-op) except where the plain moments fail: values near the
    float64 limit (numeric="standard" passes 1e308 through) overflow the sum or the squares,
    and values near its smallest magnitudes underflow the squares to a zero deviation. Those
    features are divided by their largest magnitude first, so that they keep their variation
    instead of collapsing to a constant.
    """
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        center = kept.mean(axis=0)
        scale = kept.std(axis=0)
    prescale = np.ones(kept.shape[1])
    failed = ~(np.isfinite(center) & np.isfinite(scale) & (scale > 0))
    if failed.any():
        # a kept feature is not constant, so its largest magnitude is positive
        prescale[failed] = np.abs(kept[:, failed]).max(axis=0)
        shrunk = kept[:, failed] / prescale[failed]
        center[failed] = shrunk.mean(axis=0)
        scale[failed] = shrunk.std(axis=0)
    return center, scale, prescale


def split_by_s(columns: list[ColumnEncoding], arrays: list[np.ndarray],
                numbers: list[np.ndarray | None], labeled: np.ndarray) -> dict[str, str]:
    """Columns that tell the labeled rows from the unlabeled ones by themselves, with why they
    are dropped: a numeric column missing on every row of one side only (positives from a
    registry that lacks the field: the median fill makes it constant on that side and varied
    on the other), or a column whose values on the two sides do not overlap (a copy of ``s``,
    a value recorded only for labeled rows); each only where chance would hardly give so
    clean a split (:mod:`puicl_model.estimator.input_checks`). The scores would follow such a column
    instead of the positives, and with a copy of ``s`` they would flip with its 0/1 coding.
    ``numbers``: each column's values as ``fit`` read them as numbers (None for categories)."""
    from puicl_model.estimator.input_checks import all_marked_is_telling, clean_split_is_telling

    labeled = np.asarray(labeled, dtype=bool)
    telling = clean_split_is_telling(int(labeled.sum()), int((~labeled).sum()))
    found: dict[str, str] = {}
    for column, values, numeric in zip(columns, arrays, numbers, strict=True):
        if numeric is not None:
            missing = np.isnan(numeric)
            for side, here, there in (("labeled", labeled, ~labeled),
                                      ("unlabeled", ~labeled, labeled)):
                if (missing[here].all() and not missing[there].all()
                        and all_marked_is_telling(int(here.sum()), int(missing.sum()),
                                                  len(missing))):
                    found[column.name] = (f"missing on every {side} row, recorded only for the "
                                          "others: it would tell them apart")
            ours, theirs = numeric[labeled & ~missing], numeric[~labeled & ~missing]
            apart = len(ours) and len(theirs) and (ours.max() < theirs.min()
                                                   or ours.min() > theirs.max())
        else:
            present = ~is_missing(values)
            ours = {category_key(v) for v in values[labeled & present].tolist()}
            theirs = {category_key(v) for v in values[~labeled & present].tolist()}
            apart = bool(ours) and bool(theirs) and not ours & theirs
        if apart and telling and column.name not in found:
            found[column.name] = ("separates the labeled rows from the unlabeled ones: its "
                                  "values on the two sides do not overlap (a copy of s, or a "
                                  "value recorded only for labeled rows?)")
    return found


def warn_if_missing_apart(columns: list[ColumnEncoding], arrays: list[np.ndarray],
                           numbers: list[np.ndarray | None], labeled: np.ndarray,
                           skip: dict[str, str]) -> None:
    """Warn, naming them, about the columns whose missing share among the labeled rows and
    among the unlabeled rows differ by a telling gap (:func:`puicl_model.estimator.input_checks.
    missing_gap_is_telling`); ``skip``: columns dropped already, with their own reason. A
    warning only: the column is kept, and the scores are those of any other table."""
    from puicl_model.estimator.input_checks import missing_gap_is_telling

    labeled = np.asarray(labeled, dtype=bool)
    n_labeled, n_pool = int(labeled.sum()), int((~labeled).sum())
    found = []
    for column, values, numeric in zip(columns, arrays, numbers, strict=True):
        if column.name in skip:
            continue
        missing = np.isnan(numeric) if numeric is not None else is_missing(values)
        ours, theirs = missing[labeled].mean(), missing[~labeled].mean()
        if missing_gap_is_telling(float(ours - theirs), n_labeled, n_pool):
            found.append(f"{column.name!r} (missing on {ours:.0%} of the labeled rows, "
                         f"{theirs:.0%} of the unlabeled)")
    if found:
        warnings.warn(
            "missing far more often on one side of s than on the other: " + "; ".join(found)
            + ". Missingness that tells the labeled rows from the pool points at leakage or a "
            "data error (a field filled in only for confirmed rows, the two sides exported "
            "differently), and the scores then follow it; check how the column was recorded, "
            "or drop it (puicl predict: --drop-columns)",
            UserWarning,
            stacklevel=4,  # the caller of fit
        )


class ReadingNotes:
    """What fit says about how it read the table's columns, gathered column by column and
    warned once per kind (each naming its columns)."""

    def __init__(self) -> None:
        self.tokens: list[str] = []  # text columns of numbers with missing-value tokens
        self.strays: list[str] = []  # numbers with a few stray cells, read as missing
        self.dates: list[str] = []  # ISO 8601 dates in text, read as dates
        self.not_dates: list[str] = []  # dates not read as dates, and why
        self.mostly_numbers: list[str] = []  # numbers with much text, read as categories

    def warn(self) -> None:
        stray = f"at most {STRAY_SHARE:.0%} of a column's cells"
        for found, text in (
            (self.tokens, "read as numeric, with these missing-value tokens as missing values: "),
            (self.strays, f"read as numeric, the cells that are not numbers ({stray}) read as "
                          "missing values, here and in the rows scored later: "),
            (self.dates, "read as dates (ISO 8601 text; seconds since 1970-01-01, as a date "
                         f"column; cells that are not dates, {stray}, read as missing values, "
                         "here and in the rows scored later): "),
            (self.not_dates, "read as text although they look like dates (write dates as ISO "
                             "8601, YYYY-MM-DD or YYYY-MM-DD HH:MM:SS, to read them as dates): "),
            (self.mostly_numbers, "read as categorical although mostly numbers, because of the "
                                  f"text in them (more than {STRAY_SHARE:.0%} of their cells; "
                                  "each distinct number becomes a category, not an amount; "
                                  "replace the text by an empty cell or NaN to read the column "
                                  "as numeric): "),
        ):
            if found:
                # (stacklevel: the caller of fit, past _fit_columns and _fit)
                warnings.warn(text + "; ".join(found), UserWarning, stacklevel=5)


def read_text_column(name: str, values: np.ndarray, notes: ReadingNotes,
                     ) -> tuple[str, np.ndarray | None]:
    """(the reading, the column as numbers) of a column that is not all numbers: numbers or
    dates with at most a few stray cells (:mod:`puicl_model.estimator.text_readings`), else
    ("", None), a text column, with a note where it looks like dates or is mostly numbers."""
    if values.dtype.kind not in "OUS":
        return "", None
    tally = TextTally().add(values)
    reading = tally.reading()
    if reading is None:
        refused = tally.dates_refused()
        if refused:
            notes.not_dates.append(f"{name!r} ({refused})")
        else:
            stray = stray_text(name, values)
            if stray:
                notes.mostly_numbers.append(stray)
        return "", None
    numbers = read_text(values, reading)[0]
    strays = f" ({tally.stray_note(reading)})" if tally.strays(reading) else ""
    (notes.strays if reading == NUMBERS else notes.dates).append(f"{name!r}{strays}")
    return reading, numbers
