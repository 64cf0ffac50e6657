"""Checks of what a user hands the classifier, with scikit-learn's conventions and messages.

scikit-learn's estimator checks (``tests/model/test_sklearn_checks.py``) look for its own
wording ("continuous", "Only binary classification"), so the messages here follow it.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_common.runtime import PRECISIONS, check_thread_count
from puicl_model.estimator.columns import is_dataframe
from puicl_model.passes.settings import InferenceSettings

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator

    from puicl_model.estimator.classifier import PUICLClassifier

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import _check_feature_names, _check_n_features
except ImportError:  # older: the same checks were BaseEstimator methods
    def _check_feature_names(estimator: BaseEstimator, X: Any, *, reset: bool) -> None:
        estimator._check_feature_names(X, reset=reset)

    def _check_n_features(estimator: BaseEstimator, X: Any, reset: bool) -> None:
        estimator._check_n_features(X, reset=reset)

__all__ = [
    "MISSING_SHARE_GAP", "THRESHOLD_RULE", "InvertedLabelsWarning", "check_pu_labels",
    "check_pu_table", "check_sampled_from", "check_settings", "check_table_after_fit",
    "has_mixed_names", "is_valid_threshold", "missing_gap_is_telling", "portfolio_setting",
    "root_seed",
    "warn_about_leaks", "warn_if_inverted",
]

# A feature separating the labeled rows from the pool is reported as a leak when so clean a
# split would arise by chance, for a feature unrelated to s, with a probability below this:
# 2 / C(n, n_labeled) for n rows. Small tables split cleanly by chance (3 labeled rows of 10:
# one in 60) and are not reported; a copy of s in a table of 60 rows gives about 1e-15.
_LEAK_CHANCE = 1e-6


# A column whose missing share among the labeled rows and among the unlabeled rows differ by
# at least this much is reported (docs/classifier.md, "Real tables"): the "is missing"
# indicator alone then ranks labeled rows above pool rows (or below) with an AUC of at least
# 0.5 + gap / 2 = 0.75, which points at leakage (a field filled in only once a row is
# confirmed) or a data error (the two sides exported differently), and the model reads it.
MISSING_SHARE_GAP = 0.5


def has_mixed_names(X: Any) -> bool:
    """A DataFrame whose column names are of several types (scikit-learn refuses those)."""
    return is_dataframe(X) and len({type(name) for name in X.columns}) > 1


def _first_non_number(values: np.ndarray) -> tuple[int, Any]:
    """The position and value of the first entry of ``values`` that is not a number (an array
    whose conversion to float failed has one)."""
    for row, value in enumerate(values.tolist()):
        try:
            float(value)
        except (TypeError, ValueError):
            return row, value
    return 0, values[0]  # unreachable where the conversion failed; a value to name regardless


def _is_sparse(value: Any) -> bool:
    import scipy.sparse

    return bool(scipy.sparse.issparse(value))


def check_pu_labels(s: Any, n_rows: int, name: str = "s") -> np.ndarray:
    """``s`` (1 = labeled positive, 0 = unlabeled; one per row) -> bool mask of labeled rows.
    ``name``: what the messages call ``s`` (``puicl predict`` names its label column)."""
    if _is_sparse(s):  # np.asarray would wrap it whole in a 0-d object array: "shape ()"
        raise ValueError(f"{name} is a scipy sparse {type(s).__name__} of shape {s.shape}; "
                         "pass the labels as a dense 1-D array (s.toarray().ravel())")
    values = np.asarray(s)
    if values.ndim == 0:
        raise ValueError(f"{name} must be a 1-D array of 0/1 labels, one per row of X, got a "
                         f"single {type(s).__name__}")
    if values.ndim == 2 and values.shape[1] == 1:
        from sklearn.utils.validation import column_or_1d

        values = column_or_1d(values, warn=True)  # scikit-learn's DataConversionWarning
    if values.ndim != 1:
        raise ValueError(f"s must be a 1-D array of 0/1 labels, got shape {values.shape}")
    if len(values) != n_rows:
        raise ValueError(f"X has {n_rows} rows but s has {len(values)} entries; pass one "
                         f"label per row")
    try:
        numeric = values.astype(np.float64)
    except (TypeError, ValueError):
        row, value = _first_non_number(values)
        raise ValueError(
            f"{name} must contain only 0 (unlabeled) and 1 (labeled positive); found non-numeric "
            f"values such as {value!r} (row {row})"
        ) from None
    missing = np.isnan(numeric)
    if missing.any():  # (None and NaN convert to NaN, which is no "continuous" label)
        row = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{name} must contain only 0 (unlabeled) and 1 (labeled positive); found missing "
            f"values such as {values[row:row + 1].tolist()[0]!r} (row {row})"
        )
    bad = ~np.isin(numeric, (0.0, 1.0))
    fractional = numeric[bad] != np.round(numeric[bad])
    if fractional.any():  # "continuous": the word scikit-learn's checks look for
        raise ValueError(
            f"{name} must contain only 0 (unlabeled) and 1 (labeled positive); found continuous "
            f"values such as {values[bad][fractional].tolist()[0]!r}"
        )
    if bad.any():
        found = sorted({repr(v) for v in values[bad].tolist()})[:5]
        raise ValueError(
            f"Only binary classification is supported: {name} must contain only 0 (unlabeled) "
            "and 1 (labeled positive); found "
            f"{', '.join(found)}"
        )
    labeled = numeric == 1.0
    if labeled.sum() < 2:
        raise ValueError(
            f"PU learning needs at least two labeled positives (s == 1); got "
            f"{int(labeled.sum())}"
        )
    if labeled.all():
        raise ValueError("s has no unlabeled rows (s == 0): there is nothing to classify")
    return labeled


def check_pu_table(X: Any, s: Any, sampled_from: int | None = None,
                   pool_sample: int | None = None) -> np.ndarray:
    """The mask of the labeled rows of the PU table ``(X, s)`` given to ``fit``; warns when
    ``s`` looks inverted. ``sampled_from``: ``X``'s unlabeled rows are the seeded sample of a
    pool of that many (:func:`check_sampled_from`), and whether ``s`` looks inverted is asked
    of the whole table's counts, as for the whole table given in memory."""
    if s is None:
        raise ValueError("PUICLClassifier requires y to be passed, but the target y is None; "
                         "pass s: 1 for each labeled positive row, 0 for each unlabeled row")
    n_rows = X.shape[0] if hasattr(X, "shape") else (
        len(X) if hasattr(X, "__len__") else np.asarray(X).shape[0]
    )
    if n_rows == 1:
        raise ValueError("X has 1 sample; PU learning needs at least two labeled positives "
                         "and one unlabeled row")
    labeled = check_pu_labels(s, n_rows)
    n_unlabeled = int((~labeled).sum())
    if sampled_from is not None:
        n_unlabeled = check_sampled_from(sampled_from, n_unlabeled, pool_sample)
    warn_if_inverted(int(labeled.sum()), n_unlabeled)
    return labeled


def check_sampled_from(sampled_from: Any, n_given: int, pool_sample: int | None) -> int:
    """The size of the pool whose seeded sample ``fit`` was given (``fit(X, s,
    sampled_from=n)``, :mod:`puicl_model.estimator.pool_sample`), refused in one line where the
    ``n_given`` unlabeled rows of ``X`` cannot be that sample: its size is ``min(pool_sample,
    n)``. (The rows themselves are the caller's to draw, from this fit's seed.)"""
    if isinstance(sampled_from, bool) or not isinstance(sampled_from, (int, np.integer)):
        raise ValueError(f"sampled_from must be the number of unlabeled rows the pool's sample "
                         f"was drawn from, got {sampled_from!r}")
    n_pool = int(sampled_from)
    size = n_pool if pool_sample is None else min(pool_sample, n_pool)
    if n_given != size:
        raise ValueError(f"sampled_from={n_pool}: X holds {n_given} unlabeled rows, where the "
                         f"seeded sample of a pool of {n_pool} holds {size} "
                         f"(pool_sample={pool_sample})")
    return n_pool


THRESHOLD_RULE = "a number in (0, 1) or 'prior'"


def is_valid_threshold(value: Any) -> bool:
    """Whether ``value`` is a decision threshold ``PUICLClassifier`` takes: THRESHOLD_RULE."""
    if isinstance(value, str):
        return value == "prior"
    # numpy's real scalars (np.float32(0.5), np.int64) are numbers as well; bools are not
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    return bool(numeric and 0 < value < 1)


def root_seed(state: Any) -> int:
    """The root of every random draw of a fit (draws are keyed below it) from its
    ``random_state``: the integer itself, one drawn from a RandomState or Generator (advancing
    it, as in scikit-learn), or fresh entropy for None."""
    if state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(state, np.random.RandomState):
        return int(state.randint(np.iinfo(np.int32).max))
    if isinstance(state, np.random.Generator):
        return int(state.integers(np.iinfo(np.int64).max))
    return int(state)


def portfolio_setting(estimator: PUICLClassifier) -> str:
    """The portfolio setting in effect: ``portfolio``, or ``partner``, its former name, where a
    caller still sets that."""
    former = getattr(estimator, "partner", None)
    return estimator.portfolio if former is None else former


def check_settings_in_use(estimator: PUICLClassifier) -> None:
    """Validate the parameters a fitted classifier reads at each call, which ``set_params``
    may change after ``fit`` (:meth:`PUICLClassifier._runtime`): ``n_threads``,
    ``context_cache_bytes``, ``threshold`` and ``precision``; checked at ``fit`` too."""
    check_thread_count(estimator.n_threads)
    budget = estimator.context_cache_bytes
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 0:
        raise ValueError(f"context_cache_bytes must be an integer >= 0, got {budget!r:.40}")
    if not is_valid_threshold(estimator.threshold):
        raise ValueError(f"threshold must be {THRESHOLD_RULE}, got {estimator.threshold!r:.40}")
    if estimator.precision not in PRECISIONS:
        words = ", ".join(repr(word) for word in PRECISIONS[:-1]) + f" or {PRECISIONS[-1]!r}"
        raise ValueError(f"precision must be {words}, got {estimator.precision!r:.40}")


def check_settings(estimator: PUICLClassifier) -> InferenceSettings:
    """Validate ``PUICLClassifier``'s parameters (at ``fit``: the constructor only stores
    them); returns its settings of the passes."""
    def positive_int(name: str, value: Any, minimum: int = 1) -> None:
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if not is_int or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")

    settings = InferenceSettings.read_from(estimator)
    former = getattr(estimator, "partner", None)
    if former is not None:  # the portfolio setting's former name
        import dataclasses
        import warnings

        warnings.warn("PUICLClassifier(partner=...) is now named portfolio=...; partner will be "
                      "removed", FutureWarning, stacklevel=3)
        choices = InferenceSettings.CHOICES["portfolio"]
        if former not in choices:
            raise ValueError(f"partner (the former name of portfolio) must be one of "
                             f"{', '.join(map(repr, choices))}, got {former!r}")
        if estimator.portfolio not in (InferenceSettings.portfolio, former):
            raise ValueError(f"partner={former!r} and portfolio={estimator.portfolio!r} "
                             "disagree: set portfolio only (partner is its former name)")
        settings = dataclasses.replace(settings, portfolio=portfolio_setting(estimator))
    settings.validate()
    check_settings_in_use(estimator)
    state = estimator.random_state
    if not (
        state is None
        or isinstance(state, (np.random.RandomState, np.random.Generator))
        or (isinstance(state, (int, np.integer)) and not isinstance(state, bool) and state >= 0)
    ):
        raise ValueError(f"random_state must be a non-negative integer, a numpy "
                         f"RandomState or Generator, or None, got {state!r}")
    return settings


class InvertedLabelsWarning(UserWarning):
    """``s`` marks more rows labeled than unlabeled (:func:`warn_if_inverted`)."""


def warn_if_inverted(n_labeled: int, n_unlabeled: int, stacklevel: int = 4) -> None:
    """Warn when ``s`` marks more rows labeled than unlabeled: PU data rarely looks like that,
    and a flipped ``s`` (some PU packages mark the labeled rows 0) does."""
    if n_labeled > n_unlabeled:
        warnings.warn(
            f"s marks more rows labeled positive ({n_labeled} rows with s = 1) than unlabeled "
            f"({n_unlabeled} with s = 0); in PU data the labeled positives are usually the "
            "fewer. Check that s is not inverted: 1 = labeled positive, 0 = unlabeled (some PU "
            "packages mark the labeled rows 0)",
            InvertedLabelsWarning,
            stacklevel=stacklevel,  # the caller of fit
        )


def clean_split_is_telling(n_labeled: int, n_pool: int) -> bool:
    """Whether a feature that splits ``n_labeled`` labeled rows from ``n_pool`` unlabeled
    ones cleanly says something (a chance this clean below :data:`_LEAK_CHANCE`)."""
    log_chance = math.log(2.0) - (math.lgamma(n_labeled + n_pool + 1) - math.lgamma(n_labeled + 1)
                                  - math.lgamma(n_pool + 1))
    return log_chance < math.log(_LEAK_CHANCE)


def all_marked_is_telling(n_side: int, n_marked: int, n_rows: int) -> bool:
    """Whether ``n_side`` rows all falling among ``n_marked`` of ``n_rows`` (every labeled row
    missing a value, say) says something: the chance that a random ``n_side`` rows all do is
    below :data:`_LEAK_CHANCE` (hypergeometric)."""
    if n_marked < n_side:
        return False
    log_chance = (math.lgamma(n_marked + 1) - math.lgamma(n_marked - n_side + 1)
                  - math.lgamma(n_rows + 1) + math.lgamma(n_rows - n_side + 1))
    return log_chance < math.log(_LEAK_CHANCE)


def missing_gap_is_telling(gap: float, n_labeled: int, n_pool: int) -> bool:
    """Whether the labeled rows' and the pool's missing shares, ``gap`` apart, call for a
    warning: at least :data:`MISSING_SHARE_GAP`, and a gap chance would give a column unrelated
    to s with a probability below :data:`_LEAK_CHANCE` (two-sample Hoeffding bound,
    2 exp(-2 gap² / (1/n_labeled + 1/n_pool))), so that small tables are not reported."""
    if abs(gap) < MISSING_SHARE_GAP or n_labeled == 0 or n_pool == 0:
        return False
    log_chance = math.log(2.0) - 2.0 * gap**2 / (1.0 / n_labeled + 1.0 / n_pool)
    return log_chance < math.log(_LEAK_CHANCE)


def warn_about_leaks(x_labeled: np.ndarray, x_pool: np.ndarray, labels: list[str]) -> None:
    """Warn, naming them, about features whose values among the labeled rows and among the
    unlabeled rows do not overlap: a copy of ``s``, or a value recorded only for the labeled
    rows. The model then reads ``s`` off that feature, and the scores of the pool say little
    about which of its rows are positive (they crowd near one end)."""
    if not clean_split_is_telling(len(x_labeled), len(x_pool)) or x_labeled.shape[1] == 0:
        return
    below = x_labeled.max(axis=0) < x_pool.min(axis=0)
    above = x_labeled.min(axis=0) > x_pool.max(axis=0)
    leaks = [label for label, splits in zip(labels, below | above, strict=True) if splits]
    if leaks:
        warnings.warn(
            "these columns separate the labeled rows from the unlabeled ones perfectly (their "
            "values do not overlap): " + ", ".join(repr(label) for label in leaks) + "; a copy "
            "of s, or a value recorded only for labeled rows? The scores then follow that "
            "column rather than the positives; drop it (puicl predict: --drop-columns)",
            UserWarning,
            stacklevel=3,
        )


def check_table_after_fit(estimator: PUICLClassifier, X: Any) -> None:
    """scikit-learn's checks of a table passed after fit: a warning when one of the fit
    table and X has column names and the other has not (the columns are then taken by
    position), and its error for another number of columns. When both have names the
    preprocessor matches them by name (another order is accepted) or names the missing
    and unexpected ones."""
    if is_dataframe(X) and estimator.preprocessor_.is_dataframe_:
        return
    if np.ndim(X) != 2:
        return  # the preprocessor says how to reshape it
    if not has_mixed_names(X):
        _check_feature_names(estimator, X, reset=False)
    if hasattr(X, "shape") or isinstance(X, (list, tuple)):
        _check_n_features(estimator, X, reset=False)
