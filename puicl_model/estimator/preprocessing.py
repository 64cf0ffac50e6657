"""Real tables -> the float32 feature matrix the model reads.

The model consumes numbers only and standardizes every column itself with the labeled rows'
statistics (paper §3.1). What it cannot do is read strings, skip missing values or ignore
columns that carry nothing; :class:`TablePreprocessor` does that, learning every mapping from
the table given to ``fit`` (labeled and unlabeled rows together, never the hidden labels). It
reads and types the columns (:mod:`puicl_model.estimator.columns`), drops those that carry nothing,
warns, and scales; how one column is encoded is :mod:`puicl_model.estimator.column_encoding`'s job:

* **numeric columns**: ``numeric="quantile"`` (default) replaces each value by the standard
  normal quantile of its mid-rank among the fitted rows, ``Φ⁻¹((#{< x} + #{≤ x}) / 2n)``
  (new rows: the same formula against the fitted values, clipped to ``[1/2n, 1 − 1/2n]``).
  It keeps the order of the values and removes skew and outliers, which the model, trained
  on standardized SCM outputs, handles less well than bell-shaped columns (measured in
  docs/model_card/v0.md). ``numeric="standard"`` passes the values through. ``numeric="power"``
  applies a Yeo-Johnson power transform, its exponent fitted by maximum likelihood on the
  fitted rows (bounded to ±3) (a smooth map that also removes skew but, unlike the
  normal scores, keeps the spacing of the values). Infinite values are an error.
* **categorical columns** (pandas ``category``/``object``/``string``/``bool`` columns, and
  numpy object columns whose values are not all numbers) become numbers:
  ``"onehot"`` (default) gives every category of a column with 3 to
  ``MAX_ONEHOT_LEVELS`` categories its own 0/1 feature (more categories: ``"frequency"``;
  two: one 0/1 feature); ``"ordinal"`` maps the categories, sorted by their text, to
  0, 1, 2, …; ``"frequency"`` maps each category to its share of the fitted rows. A missing
  value is a category of its own (one-hot: all zeros); a category first seen after ``fit`` is
  treated as missing.
* **text columns of numbers**: a text column whose every entry is a number, a number written
  as text, or a missing-value token (``MISSING_TOKENS``: ``?``, ``n/a``, ``NA``, ``-``, an
  empty string, ``null``, ``None``, ``nan``, …; case and surrounding spaces ignored) is read
  as numeric, the tokens as missing values. One stray ``?`` makes pandas read a whole CSV
  column as text; without this the column would be encoded as categories. ``fit`` warns,
  naming each such column and its tokens. A text column of numbers or of ISO 8601 dates with
  a few stray cells (at most 5 % that are neither) is read as numbers or as the date column it
  is, the stray cells as missing values, with a warning naming it and counting them; a column
  that looks like dates but is not read as dates is named with why
  (:mod:`puicl_model.estimator.text_readings`).
* **missing numeric values** (NaN, None, pandas NA): ``"median"`` (default) fills them with
  the column's median over the fitted rows; ``"median+indicator"`` also appends a 0/1 column
  "was missing" for every column that had missing values in ``fit``; ``"error"`` rejects them.
* **identifiers**: a column of whole numbers or text with a different value in (nearly) every
  row, found by :mod:`puicl_model.estimator.identifiers` from its values alone, whatever the rows'
  order: a customer number, a hash, a saved index. It names rows and measures nothing, so
  ``fit`` drops it and warns, naming it; ``keep_columns`` keeps a column that only looks like
  one. Fractions are never identifiers.
* **constant columns** (one value over all fitted rows, after the steps above) carry no
  information and are dropped: all values missing, one value, or categories whose frequency
  encoding is constant. ``fit`` warns, naming each dropped column and why;
  ``dropped_reasons_`` maps each to its reason. If no column is left, one all-zero column
  stands in, so the model still runs (every unlabeled row then gets the same prediction) and a
  warning says so.
* **dates and durations** (``datetime64``, with or without a time zone, ``timedelta64``,
  ``period``): read as numbers, seconds since 1970-01-01 (a period: its start) or seconds, the
  same in every unit, so that their order is kept; missing dates (NaT) are missing values.

Finally each kept column is centred and scaled with its mean and standard deviation over the
fitted rows, in float64, before the cast to float32 (a column whose values are too large or too
small for those moments, such as 1e308 under ``numeric="standard"``, is divided by its largest
magnitude first). The model's own standardization makes
this a no-op mathematically (it is invariant to positive affine maps of a column), but it keeps
large offsets (timestamps, identifiers) from losing their variation to float32 rounding.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from puicl_model.estimator.column_checks import (
    ReadingNotes,
    feature_moments,
    read_text_column,
    split_by_s,
    warn_if_missing_apart,
)
from puicl_model.estimator.column_encoding import (
    MAX_ONEHOT_LEVELS,
    CategoricalStrategy,
    ColumnEncoding,
    MissingStrategy,
    NumericStrategy,
    category_key,
    encode,
    feature_labels,
    fit_categorical,
    fit_numeric,
)
from puicl_model.estimator.columns import (
    MISSING_TOKENS,
    as_numeric,
    integer_offset,
    is_missing,
    moment_columns,
    parse_numeric,
    read_columns,
)
from puicl_model.estimator.identifiers import IdentifierWarning, identifier_reason
from puicl_model.estimator.text_readings import DATE_READINGS, read_text

__all__ = [
    "MAX_ONEHOT_LEVELS",
    "MISSING_TOKENS",
    "CategoricalStrategy",
    "MissingStrategy",
    "NumericStrategy",
    "TablePreprocessor",
]

# How fit reads a table's columns, recorded in every fitted preprocessor so that one fitted
# before reads its columns as it was fitted: 1, dates and durations as seconds in the column's
# own unit; 2, as seconds whatever the unit (columns.moments_in_seconds), and text columns of
# numbers or ISO 8601 dates with a few stray cells read as numbers or dates
# (text_readings; recorded per column in ColumnEncoding.read_as, "" before)
READING_VERSION = 2


class TablePreprocessor:
    """Learns column encodings on the fitted table; turns tables into float32 matrices.

    ``keep_columns``: names of columns to keep as features although they look like identifiers
    (:mod:`puicl_model.estimator.identifiers`); a numpy array's columns are named "0", "1", ...
    """

    def __init__(
        self,
        categorical: CategoricalStrategy = "onehot",
        missing: MissingStrategy = "median",
        numeric: NumericStrategy = "quantile",
        keep_columns: Sequence[str | int] | None = None,
    ) -> None:
        if categorical not in ("onehot", "ordinal", "frequency"):
            raise ValueError(
                f"categorical must be 'onehot', 'ordinal' or 'frequency', got {categorical!r}"
            )
        if numeric not in ("quantile", "standard", "power"):
            raise ValueError(
                f"numeric must be 'quantile', 'standard' or 'power', got {numeric!r}"
            )
        self.numeric = numeric
        if missing not in ("median", "median+indicator", "error"):
            raise ValueError(
                f"missing must be 'median', 'median+indicator' or 'error', got {missing!r}"
            )
        self.categorical = categorical
        self.missing = missing
        self.keep_columns = keep_columns

    # ------------------------------------------------------------------------------- fit
    @property
    def has_categorical_(self) -> bool:
        """Whether the fitted table has a categorical column (declared, or read as text)."""
        return any(column.kind == "categorical" for column in self.columns_)

    def fit(self, X: Any, labeled: np.ndarray | None = None) -> TablePreprocessor:
        self._fit(X, labeled)
        return self

    def _kept_names(self, names: list[str]) -> set[str]:
        """The names of ``keep_columns``, checked against the table's columns."""
        given = self.keep_columns
        if given is None:
            return set()
        if isinstance(given, (str, int, np.integer)):
            given = [given]  # one name
        wanted = [str(name) for name in given]
        unknown = [name for name in wanted if name not in names]
        if unknown:
            raise ValueError(f"keep_columns names no column of X: {unknown}; its columns are "
                             f"{names[:20]}" + (" ..." if len(names) > 20 else ""))
        return set(wanted)

    def _fit(self, X: Any, labeled: np.ndarray | None = None) -> np.ndarray:
        """Learn the encodings; return the fitted table's encoded features (before scaling),
        in X's row order. ``labeled`` (the mask of the labeled rows, where known) drops a
        column that tells the labeled rows from the unlabeled ones by itself
        (:func:`_split_by_s`)."""
        self.reading_version_ = READING_VERSION
        names, arrays, is_frame, self._declared_categorical = read_columns(X)
        if not names:
            # the rows are counted on X itself: a table without columns has no column to count
            n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
            raise ValueError(f"X has 0 feature(s) (shape=({n_rows}, 0)) while a minimum of 1 "
                             "is required; pass at least one feature")
        # dates are whole numbers of seconds, all distinct as often as not: measurements
        not_identifiers = self._kept_names(names) | moment_columns(X)
        order = None
        if labeled is not None:
            # the labeled rows first, then the others, each in their order: the moments and
            # the power exponent sum the rows in this order, so the same table laid out
            # otherwise (one file, or its positives and unlabeled rows in two) gives the
            # same bits
            labeled = np.asarray(labeled, dtype=bool)
            order = np.concatenate([np.flatnonzero(labeled), np.flatnonzero(~labeled)])
            arrays = [values[order] for values in arrays]
            labeled = labeled[order]
        self.is_dataframe_ = is_frame
        self.moment_columns_ = moment_columns(X)  # dates and durations, read as seconds
        self.feature_names_in_ = names
        self.n_features_in_ = len(names)
        columns, numbers, identifiers = self._fit_columns(names, arrays, not_identifiers)
        self.columns_ = columns
        raw = encode(columns, arrays, self.missing)
        low, high = raw.min(axis=0), raw.max(axis=0)
        keep = high > low
        features_of = self._feature_slices()
        for name in identifiers:
            keep[features_of[name]] = False
        one_sided = {} if labeled is None else split_by_s(columns, arrays, numbers, labeled)
        for name in one_sided:
            keep[features_of[name]] = False
        labels = feature_labels(columns)
        self.dropped_features_ = [
            label for label, kept in zip(labels, keep, strict=True) if not kept
        ]
        self.dropped_reasons_ = self._drop_reasons(arrays, labels, keep, identifiers,
                                                   one_sided)
        # the names of the encoded table's features ("colour=red" for a one-hot feature)
        self.kept_features_ = [label for label, kept in zip(labels, keep, strict=True) if kept]
        self.keep_ = keep
        if labeled is not None:
            warn_if_missing_apart(columns, arrays, numbers, labeled, one_sided)
        self._warn_dropped(identifiers, labeled)
        if not keep.any():
            warnings.warn(
                "every feature is constant over the fitted rows; the model sees no information "
                "and gives all unlabeled rows the same prediction",
                UserWarning,
                stacklevel=3,
            )
            self.center_ = np.zeros(0)
            self.scale_ = np.ones(0)
            self.prescale_ = np.ones(0)
        else:
            self.center_, self.scale_, self.prescale_ = feature_moments(raw[:, keep])
        if order is not None:  # back in X's order
            unordered = np.empty_like(raw)
            unordered[order] = raw
            raw = unordered
        return raw

    def _fit_columns(self, names: list[str], arrays: list[np.ndarray],
                     not_identifiers: set[str],
                     ) -> tuple[list[ColumnEncoding], list[np.ndarray | None], dict[str, str]]:
        """Each column's encoding, its values as numbers (None for categories) and, by name,
        the columns that are identifiers with why; warns about text read as numbers or dates
        and numbers read as categories. A text column read as numbers or dates
        (:mod:`puicl_model.estimator.text_readings`) is replaced in ``arrays`` by its numbers."""
        columns: list[ColumnEncoding] = []
        notes = ReadingNotes()
        numbers: list[np.ndarray | None] = []  # each column as numbers (None: categories)
        identifiers: dict[str, str] = {}
        for position, (name, values) in enumerate(zip(names, arrays, strict=True)):
            offset = integer_offset(values)  # 0 but for integers too large for float64
            numeric, tokens = (None, {}) if name in self._declared_categorical else (
                parse_numeric(values, offset)
            )
            reading = ""
            if numeric is None and name not in self._declared_categorical:
                reading, numeric = read_text_column(name, values, notes)
                if reading:
                    arrays[position] = numeric
            numbers.append(numeric)
            if numeric is not None:
                columns.append(fit_numeric(name, numeric, self.numeric, self.missing, offset,
                                           reading))
                if values.dtype.kind in "OUS" and tokens:
                    found = ", ".join(f"{token!r} ×{count}" for token, count in tokens.items())
                    notes.tokens.append(f"{name!r} ({found})")
            else:
                columns.append(fit_categorical(name, values, self.categorical))
            dates = name in not_identifiers or reading in DATE_READINGS
            reason = None if dates else identifier_reason(values, numeric)
            if reason is not None:
                identifiers[name] = reason
        notes.warn()
        return columns, numbers, identifiers

    def _warn_dropped(self, identifiers: dict[str, str],
                      labeled: np.ndarray | None = None) -> None:
        """One warning for the identifiers dropped (naming the rows their values were counted
        on, where ``labeled`` tells them), one for the other columns dropped."""
        if identifiers:
            counted = "" if labeled is None else (
                f"; counted on the {len(labeled):,} rows fit read: {int(labeled.sum()):,} "
                f"labeled, {int((~labeled).sum()):,} unlabeled")
            warnings.warn(
                "dropped as identifiers (whole numbers or text, a different value in nearly "
                "every row; keep_columns, or puicl predict --keep-columns, keeps one as a "
                "feature): "
                + "; ".join(f"{name!r} ({why.split(': ', 1)[1]})"
                            for name, why in identifiers.items()) + counted,
                IdentifierWarning,
                stacklevel=4,
            )
        others = {label: why for label, why in self.dropped_reasons_.items()
                  if label.split(" (missing)")[0] not in identifiers}
        if others:
            warnings.warn(
                "dropped columns that carry no information: "
                + "; ".join(f"{label!r} ({why})" for label, why in others.items()),
                UserWarning,
                stacklevel=4,
            )

    def _feature_slices(self) -> dict[str, slice]:
        """The features each fitted column becomes, by the column's name."""
        stops = np.cumsum([column.width for column in self.columns_]).tolist()
        return {column.name: slice(stop - column.width, stop)
                for column, stop in zip(self.columns_, stops, strict=True)}

    def _drop_reasons(self, arrays: list[np.ndarray], labels: list[str], keep: np.ndarray,
                      identifiers: dict[str, str],
                      one_sided: dict[str, str] | None = None) -> dict[str, str]:
        """Why each dropped feature carries no information, in words a user recognizes."""
        reasons: dict[str, str] = {}
        feature = 0
        for column, values in zip(self.columns_, arrays, strict=True):
            for offset in range(column.width):
                index = feature + offset
                if keep[index]:
                    continue
                if column.name in identifiers:
                    reasons[labels[index]] = identifiers[column.name]
                    continue
                if one_sided and column.name in one_sided:
                    reasons[labels[index]] = one_sided[column.name]
                    continue
                missing = is_missing(values)
                if column.kind == "numeric":
                    numeric = as_numeric(values)
                    missing = missing if numeric is None else np.isnan(numeric)
                # (a "was missing" indicator is constant only when every value is missing)
                if missing.all() or (column.indicator and offset == 1):
                    why = "every value missing"
                elif column.kind == "numeric":
                    why = f"constant: every value is {column.fill:g}"
                else:
                    present = [category_key(v) for v in values[~missing].tolist()]
                    distinct = len(set(present))
                    if distinct == 1:
                        why = f"constant: every value is {values[~missing][0]!r}"
                    elif distinct == len(values):
                        why = "text with a different value in every row (an identifier?)"
                    else:
                        why = f"{distinct} categories, all equally frequent: their frequency " \
                              "encoding is constant"
                reasons[labels[index]] = why
            feature += column.width
        return reasons

    # ------------------------------------------------------------------------- transform
    def transform(self, X: Any) -> np.ndarray:
        """float32 [n_rows, n_kept_features] for the table ``X`` (columns as in ``fit``)."""
        return self._scaled(encode(self.columns_, self._arrays(X), self.missing))

    def beyond_fitted_range(self, X: Any) -> np.ndarray:
        """Per row of ``X`` (checked by :meth:`transform` already): whether a value of a
        ``numeric="quantile"`` column lies beyond the column's fitted values. Such a value
        encodes as the fitted extreme, so the row can encode as a fitted row it is not."""
        beyond = np.zeros(len(X), dtype=bool)
        for column, values in zip(self.columns_, self._arrays(X), strict=True):
            if column.quantiles is not None and len(column.quantiles):
                numeric = as_numeric(values, column.offset)
                with np.errstate(invalid="ignore"):  # (NaN: missing, never beyond)
                    beyond |= (numeric < column.quantiles[0]) | (numeric > column.quantiles[-1])
        return beyond

    def _arrays(self, X: Any) -> list[np.ndarray]:
        """The columns of ``X`` in the order of ``fit``, refused where they differ from it,
        each read as in ``fit`` (a text column of numbers or dates as numbers)."""
        version = getattr(self, "reading_version_", 1)  # (fitted before it was recorded: 1)
        names, arrays, is_frame, self._declared_categorical = read_columns(
            X, unit_free_seconds=version >= 2)
        if is_frame and self.is_dataframe_:
            if names != self.feature_names_in_:
                missing = [n for n in self.feature_names_in_ if n not in names]
                extra = [n for n in names if n not in self.feature_names_in_]
                if missing or extra:
                    raise ValueError(
                        "X's columns differ from those seen in fit: "
                        + (f"missing {missing}" if missing else "")
                        + ("; " if missing and extra else "")
                        + (f"unexpected {extra}" if extra else "")
                    )
                position = {n: i for i, n in enumerate(names)}  # same names, other order
                arrays = [arrays[position[n]] for n in self.feature_names_in_]
            moments = moment_columns(X)
            self._check_moments(moments)
        elif len(names) != self.n_features_in_:
            raise ValueError(
                f"X has {len(names)} columns but the classifier was fitted with "
                f"{self.n_features_in_}; pass the same columns as in fit"
            )
        else:
            moments = set()
        return [self._read_as_fitted(column, values, column.name in moments)
                for column, values in zip(self.columns_, arrays, strict=True)]

    @staticmethod
    def _read_as_fitted(column: ColumnEncoding, values: np.ndarray, moment: bool,
                        ) -> np.ndarray:
        """The column ``values`` read as ``fit`` read it: a text column of numbers or dates
        (``column.read_as``) as numbers, its cells that are not read as missing values; a date
        column of a text column of dates as its seconds already (``moment``)."""
        reading = getattr(column, "read_as", "")  # (fitted before it was recorded: "")
        if not reading or (moment and reading in DATE_READINGS):
            return values
        if reading in DATE_READINGS and values.dtype.kind not in "OUS":
            raise ValueError(f"column {column.name!r} held dates written as text in fit, but "
                             "now holds numbers; pass it as in fit (dates as text or as a "
                             "date column)")
        return read_text(values, reading)[0]

    def _check_moments(self, moments: set[str]) -> None:
        """Refuse a column that holds dates or durations now and did not at fit, or the
        reverse: both are read as numbers, so seconds since 1970 would silently be compared
        with the amounts the column held (or amounts with seconds)."""
        fitted = getattr(self, "moment_columns_", None)
        if fitted is None:  # fitted before the types were recorded
            return
        # (a text column of dates is read as seconds, and its date column as well)
        text_dates = {column.name for column in self.columns_
                      if getattr(column, "read_as", "") in DATE_READINGS}
        for name in self.feature_names_in_:
            if (name in moments) != (name in fitted) and name not in text_dates:
                now, then = (("dates or durations", "other values") if name in moments
                             else ("other values", "dates or durations"))
                raise ValueError(f"column {name!r} holds {now}, but it held {then} in fit; "
                                 "pass it as in fit")

    def _scaled(self, raw: np.ndarray) -> np.ndarray:
        if not self.keep_.any():
            return np.zeros((raw.shape[0], 1), dtype=np.float32)
        kept = raw[:, self.keep_]
        return ((kept / self.prescale_ - self.center_) / self.scale_).astype(np.float32)

    def fit_transform(self, X: Any, labeled: np.ndarray | None = None) -> np.ndarray:
        return self._scaled(self._fit(X, labeled))  # the fitted table is encoded once
