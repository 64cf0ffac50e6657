"""How one column becomes model features: the encodings of
:mod:`puicl_model.estimator.preprocessing`.

Each encoding is learned on the fitted rows of its column (:func:`fit_numeric`,
:func:`fit_categorical`) and applied to any rows of it (:func:`encode`); the module docstring
of :mod:`puicl_model.estimator.preprocessing` describes each strategy for users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from puicl_model.estimator.columns import as_numeric, is_missing

__all__ = [
    "MAX_ONEHOT_LEVELS",
    "CategoricalStrategy",
    "ColumnEncoding",
    "MissingStrategy",
    "NumericStrategy",
    "category_key",
    "encode",
    "feature_labels",
    "fit_categorical",
    "fit_numeric",
    "missing_mask",
]

CategoricalStrategy = Literal["onehot", "ordinal", "frequency"]
NumericStrategy = Literal["quantile", "standard", "power"]

# One-hot encoding beyond this many categories would crowd out the other features (the model
# reads 20 per pass); such columns are frequency-encoded instead.
MAX_ONEHOT_LEVELS = 16
MissingStrategy = Literal["median", "median+indicator", "error"]

# numeric="power": the Yeo-Johnson exponent is bounded, because a few outliers can drive its
# maximum-likelihood estimate far enough that a new row's value overflows float64
_POWER_LAMBDA_BOUND = 3.0
_POWER_CAP = 1e30
# the exponent is fitted on at most this many order statistics of a column (cost; the fitted
# exponent moves by about one grid step of 0.05 at most)
_POWER_FIT_POINTS = 256

_MISSING = "\x00missing"  # the category that stands for a missing categorical value


@dataclass
class ColumnEncoding:
    """How one input column becomes zero, one or two model features."""

    name: str
    kind: Literal["numeric", "categorical"]
    fill: float = 0.0  # numeric: median of the fitted rows
    indicator: bool = False  # append a "was missing" feature
    codes: dict[str, float] = field(default_factory=dict)  # categorical: category -> number
    missing_code: float = 0.0  # categorical: the number of the missing category
    onehot: list[str] = field(default_factory=list)  # categorical: one feature per category
    quantiles: np.ndarray | None = None  # numeric, numeric="quantile": sorted fitted values
    power: float | None = None  # numeric="power": the Yeo-Johnson exponent
    # numeric: subtracted from an integer column of huge values before it becomes float64
    # (puicl_model.estimator.columns.integer_offset)
    offset: int = 0
    # numeric: how a text column is read as numbers (puicl_model.estimator.text_readings:
    # "numbers", "dates", "dates+zone"), its stray cells as missing values; "": as given (the
    # column's numbers, or its text where every entry is a number), as before these readings
    read_as: str = ""

    @property
    def width(self) -> int:
        """How many model features the column becomes."""
        return len(self.onehot) if self.onehot else 1 + int(self.indicator)


def category_key(value: Any) -> str:
    """A category's identity: its text (so 1, 1.0 and '1' of a mixed column stay distinct)."""
    return f"{type(value).__name__}:{value}"


def _normal_scores(values: np.ndarray, fitted_sorted: np.ndarray) -> np.ndarray:
    """Standard normal quantile of each value's mid-rank among the fitted values."""
    from scipy.special import ndtri

    n = len(fitted_sorted)
    # the values searched in sorted order, then put back: the same counts, faster on a large
    # column, the searches walking the fitted values in order instead of jumping through them
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    below = np.empty(len(values), dtype=np.int64)
    at_or_below = np.empty(len(values), dtype=np.int64)
    below[order] = np.searchsorted(fitted_sorted, ordered, side="left")
    at_or_below[order] = np.searchsorted(fitted_sorted, ordered, side="right")
    share = np.clip((below + at_or_below) / (2.0 * n), 0.5 / n, 1.0 - 0.5 / n)
    return ndtri(share)


def _yeo_johnson(values: np.ndarray, exponent: np.ndarray | float) -> np.ndarray:
    """The Yeo-Johnson transform of ``values`` (last axis) with ``exponent`` (broadcast)."""
    exponent = np.asarray(exponent, dtype=np.float64)
    positive = values >= 0
    log_pos = np.log1p(np.where(positive, values, 0.0))
    log_neg = np.log1p(np.where(positive, 0.0, -values))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        near_zero, near_two = np.abs(exponent) < 1e-9, np.abs(exponent - 2.0) < 1e-9
        up = np.where(near_zero, log_pos,
                      np.expm1(exponent * log_pos) / np.where(near_zero, 1.0, exponent))
        down = np.where(near_two, -log_neg, -np.expm1((2.0 - exponent) * log_neg)
                        / np.where(near_two, 1.0, 2.0 - exponent))
    return np.where(positive, up, down)


def _fit_power(values: np.ndarray) -> float | None:
    """numeric="power": the Yeo-Johnson exponent of a column (maximum likelihood on a grid of
    step 0.05 in ±``_POWER_LAMBDA_BOUND``), None if the column is constant."""
    if not values.max() > values.min():
        return None  # constant: dropped later, nothing to fit
    # (on the raw values: the transform is not scale-free, and standardizing first fits a
    # worse exponent, e.g. skewness 0.64 against 0.26 on a log-normal column.) A grid rather
    # than scipy's optimizer, which cost 20 columns of 1000 rows more than a third of a
    # forward pass of their table.
    if len(values) > _POWER_FIT_POINTS:  # evenly spaced order statistics: the same shape
        ranks = np.linspace(0, len(values) - 1, _POWER_FIT_POINTS).round().astype(np.int64)
        values = np.sort(values)[ranks]
    grid = np.linspace(-_POWER_LAMBDA_BOUND, _POWER_LAMBDA_BOUND, 121)[:, None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_var = _log_variance(values, grid)
    jacobian = (grid[:, 0] - 1.0) * np.sum(np.sign(values) * np.log1p(np.abs(values)))
    likelihood = -0.5 * len(values) * log_var + jacobian
    likelihood[~np.isfinite(likelihood)] = -np.inf
    return float(grid[int(np.argmax(likelihood)), 0])


def _log_variance(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """log Var of the Yeo-Johnson transform of ``values`` for each exponent of ``grid`` [g, 1].

    A column of one sign is transformed by ``±expm1(p · log1p(|x|)) / p`` (p = λ, or 2 − λ for
    negative values), whose variance is ``Var(exp(p·L)) / p²``; computed in log space with the
    largest exponent factored out, it stays exact where the values themselves are equal to
    float64 precision (a large offset, such as timestamps, with λ < 0)."""
    if values.min() >= 0 or values.max() <= 0:
        power = grid if values.min() >= 0 else 2.0 - grid
        logs = np.log1p(np.abs(values))[None, :]
        scaled = power * logs
        top = scaled.max(axis=1, keepdims=True)
        variance_log = 2.0 * top[:, 0] + np.log(np.exp(scaled - top).var(axis=1))
        zero = np.abs(power[:, 0]) < 1e-9  # the log1p branch: the variance of the logs
        return np.where(zero, np.log(logs.var()), variance_log - 2.0 * np.log(np.abs(power[:, 0])))
    return np.log(_yeo_johnson(values[None, :], grid).var(axis=1))


def _power_transform(values: np.ndarray, exponent: float) -> np.ndarray:
    # a new row far outside the fitted range can exceed float32 (|x|^5 at the bound): keep it
    # finite, the model clips standardized values long before that
    return np.clip(_yeo_johnson(values, exponent), -_POWER_CAP, _POWER_CAP)


def missing_mask(name: str, values: np.ndarray, missing: MissingStrategy) -> np.ndarray:
    """NaN mask of a numeric column; infinities, and NaN under missing='error', are errors
    (the same rules in fit and transform)."""
    if np.isinf(values).any():
        row = int(np.flatnonzero(np.isinf(values))[0])
        raise ValueError(
            f"column {name!r} holds an infinite value (row {row}); replace it with a finite "
            f"number or NaN (missing)"
        )
    gaps = np.isnan(values)
    if gaps.any() and missing == "error":
        raise ValueError(
            f"column {name!r} has {int(gaps.sum())} missing values (NaN) and "
            f"missing='error'; impute them, or use missing='median'"
        )
    return gaps


def fit_numeric(name: str, values: np.ndarray, numeric: NumericStrategy,
                missing: MissingStrategy, offset: int = 0, read_as: str = "",
                ) -> ColumnEncoding:
    """How the numeric column ``name`` becomes one feature (two with a "was missing" indicator),
    learned on its fitted ``values`` (read less ``offset``, or from text as ``read_as`` says,
    which the encoding keeps)."""
    gaps = missing_mask(name, values, missing)
    fill = float(np.median(values[~gaps])) if (~gaps).any() else 0.0
    indicator = bool(gaps.any()) and missing == "median+indicator"
    quantiles = power = None
    filled = np.where(gaps, fill, values)
    if numeric == "quantile":
        quantiles = np.sort(filled)
    elif numeric == "power":
        power = _fit_power(filled)
    return ColumnEncoding(name, "numeric", fill=fill, indicator=indicator,
                          quantiles=quantiles, power=power, offset=offset, read_as=read_as)


def fit_categorical(name: str, values: np.ndarray, categorical: CategoricalStrategy,
                    ) -> ColumnEncoding:
    """How the categorical column ``name`` becomes features, learned on its fitted ``values``;
    the categories are ordered by their text."""
    missing = is_missing(values)
    keys = [_MISSING if gone else category_key(v) for v, gone in
            zip(values.tolist(), missing.tolist(), strict=True)]
    categories, counts = np.unique(np.asarray(keys, dtype=object), return_counts=True)
    known = [c for c in categories.tolist() if c != _MISSING]
    if categorical == "onehot" and 2 < len(known) <= MAX_ONEHOT_LEVELS:
        return ColumnEncoding(name, "categorical", onehot=known)
    if categorical == "ordinal" or (categorical == "onehot" and len(known) <= 2):
        codes = {c: float(i) for i, c in enumerate(known)}
        missing_code = float(len(known))  # missing (and unseen) after the known ones
    else:
        shares = counts / counts.sum()
        codes = {c: float(s) for c, s in zip(categories.tolist(), shares, strict=True)}
        missing_code = codes.pop(_MISSING, 0.0)
    return ColumnEncoding(name, "categorical", codes=codes, missing_code=missing_code)


def feature_labels(columns: list[ColumnEncoding]) -> list[str]:
    """The names of the features ``columns`` become ("colour=red" for a one-hot feature)."""
    labels: list[str] = []
    for column in columns:
        if column.onehot:
            labels.extend(f"{column.name}={category.split(':', 1)[1]}"
                          for category in column.onehot)
            continue
        labels.append(column.name)
        if column.indicator:
            labels.append(f"{column.name} (missing)")
    return labels


def _encode_numeric(column: ColumnEncoding, values: np.ndarray, missing: MissingStrategy,
                    ) -> list[np.ndarray]:
    numeric = as_numeric(values, column.offset)
    if numeric is None:
        raise ValueError(
            f"column {column.name!r} was numeric in fit but now holds non-numeric values"
        )
    gaps = missing_mask(column.name, numeric, missing)
    filled = np.where(gaps, column.fill, numeric)
    if column.quantiles is not None:
        filled = _normal_scores(filled, column.quantiles)
    elif column.power is not None:
        filled = _power_transform(filled, column.power)
    return [filled, gaps.astype(np.float64)] if column.indicator else [filled]


def _encode_categorical(column: ColumnEncoding, values: np.ndarray, missing: MissingStrategy,
                        ) -> list[np.ndarray]:
    absent = is_missing(values)
    if column.onehot:
        keys = np.asarray([_MISSING if gone else category_key(v) for v, gone in
                           zip(values.tolist(), absent.tolist(), strict=True)], dtype=object)
        return [(keys == category).astype(np.float64) for category in column.onehot]
    return [np.array(
        [
            column.missing_code if gone else column.codes.get(category_key(v), column.missing_code)
            for v, gone in zip(values.tolist(), absent.tolist(), strict=True)
        ],
        dtype=np.float64,
    )]


def encode(columns: list[ColumnEncoding], arrays: list[np.ndarray], missing: MissingStrategy,
           ) -> np.ndarray:
    """The features [n_rows, n_features] (float64, before scaling) of the columns ``arrays``."""
    features: list[np.ndarray] = []
    for column, values in zip(columns, arrays, strict=True):
        encoder = _encode_numeric if column.kind == "numeric" else _encode_categorical
        features.extend(encoder(column, values, missing))
    return np.stack(features, axis=1) if features else np.zeros((0, 0))
