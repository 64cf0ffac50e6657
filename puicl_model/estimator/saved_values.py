"""The values a saved classifier's fitted state declares, checked against what scoring reads
them as (:func:`check_values`; :func:`puicl_model.estimator.saved_checks.check_fitted` calls it
once the state's form is checked).

A re-signed folder passes its checksums, and :mod:`~.saved_checks` vouches for the form of its
state (its classes, their fields' types, the arrays' dtypes and shapes against the files, the
trees, the pass planners). What is left is the values, which scoring trusts:

* **lengths that agree**: a column's encoding and its preprocessor's kept features, scales and
  centres; the views' rows and their width; the fitted pool's probabilities and its rows; a
  blend's scores and its probabilities; each learner's scores and its rows;
* **ranges**: probabilities in [0, 1], scales above 0, a blend's weights above 0, sorted maps,
  thread counts within :data:`puicl_common.runtime.MAX_THREADS`, counts at least 0, the
  learners' summed values within :data:`LEARNER_MAGNITUDE`;
* **finiteness** of every scalar, as :mod:`~.saved_checks` checks every array: a NaN weight or
  fill value gives NaN scores;
* **references**: a blend's members among the learners the folder holds, the choice's blend
  the blend's, a preprocessor's columns column encodings (not an object shared from elsewhere).

Each failure is one line of :class:`~.saved_folder.SavedModelError` naming the file and the
entry, e.g. ``portfolio_.blend.standard['bagged']``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_model.estimator.saved_folder import SavedModelError
from puicl_model.estimator.saved_portfolio_values import LEARNER_MAGNITUDE, check_portfolio
from puicl_model.estimator.saved_primitives import (
    Refused,
    check_array,
    check_mapping,
    check_number,
    check_text,
    shown,
)

if TYPE_CHECKING:
    from puicl_model.estimator.ensemble import View

__all__ = ["LEARNER_MAGNITUDE", "check_values"]


# ----------------------------------------------------------------------- column encodings
def _column(entry: str, column: Any) -> int:
    """A column encoding as encode() reads it; its width (the features it becomes)."""
    from puicl_model.estimator.column_encoding import _POWER_LAMBDA_BOUND, ColumnEncoding

    if not isinstance(column, ColumnEncoding):
        raise Refused(entry, f"is a {type(column).__name__}, not a column encoding")
    kind = check_text(f"{entry}.kind", column.kind, ("numeric", "categorical"))
    if kind == "numeric":
        check_number(f"{entry}.fill", column.fill)
        if column.codes or column.onehot:
            raise Refused(entry, "is numeric with categories")
        if column.quantiles is not None:
            check_array(f"{entry}.quantiles", column.quantiles, nonempty=True, ordered=True)
        if column.power is not None:
            check_number(f"{entry}.power", column.power, -_POWER_LAMBDA_BOUND, _POWER_LAMBDA_BOUND)
        # an integer column's values less it, in integer arithmetic, then as float64: the
        # smallest value of an int64 or uint64 column
        offset = check_number(f"{entry}.offset", column.offset, whole=True)
        if not -(2**63) <= offset < 2**64:
            raise Refused(f"{entry}.offset", f"is {shown(offset)}, beyond any 64-bit integer")
        return column.width
    if column.indicator or column.quantiles is not None or column.power is not None:
        raise Refused(entry, "is categorical with a numeric column's encoding")
    check_number(f"{entry}.missing_code", column.missing_code)
    for category, code in column.codes.items():
        check_text(f"{entry}.codes key", category)
        check_number(f"{entry}.codes[{category!r:.20}]", code)
    if not all(isinstance(category, str) for category in column.onehot):
        raise Refused(f"{entry}.onehot", "holds categories that are not text")
    return column.width


def _preprocessor(entry: str, preprocessor: object) -> int:
    """A fitted preprocessor as transform() reads it; the number of features it gives (one
    zero feature where it keeps none)."""
    from puicl_model.estimator.preprocessing import TablePreprocessor

    if not isinstance(preprocessor, TablePreprocessor):
        raise Refused(entry, f"is a {type(preprocessor).__name__}, not a table preprocessor")
    state = vars(preprocessor)
    required = ("numeric", "categorical", "missing", "columns_", "feature_names_in_",
                "n_features_in_", "is_dataframe_", "keep_", "center_", "scale_", "prescale_")
    absent = [name for name in required if name not in state]
    if absent:
        raise Refused(entry, f"lacks {', '.join(absent[:3])}")
    check_text(f"{entry}.numeric", preprocessor.numeric, ("quantile", "standard", "power"))
    check_text(f"{entry}.categorical", preprocessor.categorical, ("onehot", "ordinal", "frequency"))
    check_text(f"{entry}.missing", preprocessor.missing, ("median", "median+indicator", "error"))
    if not isinstance(preprocessor.is_dataframe_, bool):
        raise Refused(f"{entry}.is_dataframe_", "is not true or false")
    columns = preprocessor.columns_
    if not isinstance(columns, list) or not columns:
        raise Refused(f"{entry}.columns_", "is not a list of column encodings")
    width = sum(_column(f"{entry}.columns_[{number}]", column)
                for number, column in enumerate(columns))
    names = preprocessor.feature_names_in_
    if (not isinstance(names, list) or names != [column.name for column in columns]
            or preprocessor.n_features_in_ != len(columns)
            or type(preprocessor.n_features_in_) is not int):
        raise Refused(f"{entry}.feature_names_in_", "are not its columns' names")
    moments = state.get("moment_columns_", set())
    if not isinstance(moments, (set, frozenset)) or not moments <= set(names):
        raise Refused(f"{entry}.moment_columns_", "names no column of it")
    keep = check_array(f"{entry}.keep_", preprocessor.keep_, kinds="b", length=width)
    kept = int(np.count_nonzero(keep))
    check_array(f"{entry}.center_", preprocessor.center_, length=kept)
    check_array(f"{entry}.scale_", preprocessor.scale_, length=kept, low=0.0, above=True)
    check_array(f"{entry}.prescale_", preprocessor.prescale_, length=kept, low=0.0, above=True)
    return max(1, kept)


# ------------------------------------------------------------------------------ the table
def _view(entry: str, view: View, with_table: bool) -> int:
    """A view's preprocessor, and with the table its rows (and their ranking scores) of the
    preprocessor's width; the view's width."""
    width = _preprocessor(f"{entry}.preprocessor", view.preprocessor)
    if with_table:
        rows = [check_array(f"{entry}.{name}", getattr(view, name), ndim=2, kinds="f")
                for name in ("x_labeled", "x_pool")]
        if any(part.shape[1] != width for part in rows):
            raise Refused(f"{entry}.x_pool", f"has rows of another width than its {width} "
                                              "features")
        for name, part in (("labeled_score", rows[0]), ("pool_score", rows[1])):
            if getattr(view, name) is not None:
                check_array(f"{entry}.{name}", getattr(view, name), length=len(part))
    return width


def _probabilities(entry: str, value: Any, length: int | None = None) -> np.ndarray:
    return check_array(entry, value, length=length, low=0.0, high=1.0)


def _folds(entry: str, folds: Any, n_labeled: int, n_pool: int, entropy: int) -> None:
    """The model's cross-fitted scores per fold count: per fold, the probabilities of its
    labeled rows (those :func:`~puicl_model.estimator.prior.fold_of` puts in it) and of the
    pool's ``n_pool`` rows (or of the sample of them a larger pool's folds are scored
    against)."""
    from puicl_model.estimator.prior import PRIOR_POOL_ROWS, fold_of

    for n_folds, per_fold in check_mapping(entry, folds).items():
        check_number(f"{entry} key", n_folds, 2, max(2, n_labeled // 2), whole=True)
        sizes = np.bincount(fold_of(n_labeled, n_folds, entropy), minlength=n_folds)
        if not isinstance(per_fold, list) or len(per_fold) != n_folds:
            raise Refused(f"{entry}[{n_folds}]", f"does not hold {n_folds} folds")
        for number, fold in enumerate(per_fold):
            where = f"{entry}[{n_folds}][{number}]"
            if not isinstance(fold, tuple) or len(fold) != 2:
                raise Refused(where, "is not a pair of arrays")
            _probabilities(f"{where} positives", fold[0], int(sizes[number]))
            _probabilities(f"{where} pool", fold[1])
            if len(fold[1]) not in (n_pool, min(n_pool, PRIOR_POOL_ROWS)):
                raise Refused(f"{where} pool", f"holds {len(fold[1])} rows, not the pool's "
                                                f"{n_pool} nor a sample of {PRIOR_POOL_ROWS}")


def _scorer(state: Mapping[str, Any], with_table: bool, views: list) -> int | None:
    """The fitted scorer's own entries; the fitted pool's rows (None without the table)."""
    check_number("n_held_out_", state.get("n_held_out_"), 0, whole=True)
    entropy = check_number("_entropy", state.get("_entropy"), 0, whole=True)
    # every random draw is keyed by the fit's root seed: the planners' and the portfolio's too
    if any(planner.entropy != entropy for planner in state["planners_"]) or (
            state.get("portfolio_") is not None and state["portfolio_"].entropy != entropy):
        raise Refused("_entropy", "is not the root seed of every pass planner and learner")
    for name in ("n_passes_", "inference_seconds_"):
        if name in state:
            check_number(name, state[name], 0)
    for n_folds, estimate in check_mapping("_class_prior", state.get("_class_prior", {})).items():
        check_number("_class_prior key", n_folds, 1, whole=True)
        check_number(f"_class_prior[{n_folds}]", estimate, 0.0, 1.0)
    if not with_table:
        if state.get("_new_row_cut") is not None:
            check_number("_new_row_cut", state["_new_row_cut"], 0.0, 1.0)
        return None
    first = views[0]
    width, n_held = first.x_pool.shape[1], state["n_held_out_"]
    in_context = state.get("_held_in_context", False)
    if not isinstance(in_context, bool) or (in_context and n_held == 0):
        raise Refused("_held_in_context", "is not true (positives held out, in the passes' "
                                           "context) or false")
    # the first view's rows: its labeled ones; its pool, less the held-out positives that
    # follow it there in a folder saved before they stayed in the context
    expected = {"x_labeled_": first.x_labeled.shape,
                "x_pool_": (len(first.x_pool) - (0 if in_context else n_held), width)}
    for name, shape in expected.items():
        rows = check_array(name, state[name], ndim=2)
        if rows.shape != shape:
            raise Refused(name, f"is {list(rows.shape)} where the first view's rows make "
                                 f"{list(shape)}")
    n_pool = len(state["x_pool_"])
    _probabilities("_pool_proba", state.get("_pool_proba"), n_pool)
    held, held_proba = state.get("_x_held"), state.get("_held_proba")
    if (held is None) != (held_proba is None) or (held is None) != (state["n_held_out_"] == 0):
        raise Refused("_x_held", "and _held_proba, or n_held_out_, disagree on the positives "
                                  "held out")
    if held is not None:
        check_array("_x_held", held, ndim=2, length=state["n_held_out_"])
        if held.shape[1] != width:
            raise Refused("_x_held", "has rows of another width than the first view's")
        _probabilities("_held_proba", held_proba, len(held))
    evidence_pool = state.get("_evidence_pool_proba")
    if (evidence_pool is None) == in_context:
        raise Refused("_evidence_pool_proba", "and _held_in_context disagree on the evidence's "
                                               "own passes")
    if evidence_pool is not None:
        _probabilities("_evidence_pool_proba", evidence_pool)
        if not 0 < len(evidence_pool) <= n_pool:
            raise Refused("_evidence_pool_proba", f"holds {len(evidence_pool)} rows, not "
                                                   f"between 1 and the pool's {n_pool}")
    # (as cross_fitted_scores draws and scores them: over the first planner's pool)
    _folds("_held_out", state.get("_held_out", {}), len(first.x_labeled),
           state["planners_"][0].n_pool, state["_entropy"])
    return n_pool


def _classifier(state: Mapping[str, Any], views: list) -> None:
    """The classifier's scikit-learn attributes, against the first view's columns."""
    n_features = views[0].preprocessor.n_features_in_
    if "n_features_in_" in state and state["n_features_in_"] != n_features:
        raise Refused("n_features_in_", f"is not the {n_features} columns of the first view")
    names = state.get("feature_names_in_")
    if names is not None and (not isinstance(names, np.ndarray) or names.shape != (n_features,)
                              or not all(isinstance(name, str) for name in names.tolist())):
        raise Refused("feature_names_in_", f"is not {n_features} column names")
    classes = state.get("classes_")
    if classes is not None and (not isinstance(classes, np.ndarray)
                                or classes.tolist() != [0, 1]):
        raise Refused("classes_", "are not 0 and 1")
    for name in ("n_pool_in_", "n_estimators_"):
        if name in state:
            check_number(name, state[name], 0, whole=True)


# --------------------------------------------------------------------------------- entry
def check_values(path: Path, state: Mapping[str, Any], with_table: bool) -> None:
    """Refuse (:class:`SavedModelError`, one line naming ``path`` and the entry) fitted state
    whose values scoring cannot read as they are (the module docstring's list). ``state`` is
    the decoded fitted state whose form :func:`~.saved_checks.check_fitted` checked."""
    views = state["views_"]
    try:
        for number, view in enumerate(views):
            _view(f"views_[{number}]", view, with_table)
        _classifier(state, views)
        n_pool = _scorer(state, with_table, views)
        if state.get("portfolio_") is not None:
            n_held = state["n_held_out_"]
            outside = 0 if state.get("_held_in_context", False) else n_held
            rows = (None if n_pool is None
                    else (len(state["x_labeled_"]) + outside, n_pool))
            portfolio = state["portfolio_"]
            width = _preprocessor("portfolio_.encoder", portfolio.encoder)
            check_portfolio("portfolio_", portfolio, width, rows, n_held)
    except Refused as refused:
        raise SavedModelError(f"{path}: {refused}; not what puicl saves") from None
