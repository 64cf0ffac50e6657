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

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_common.runtime import check_thread_count
from puicl_model.estimator.saved_folder import SavedModelError

if TYPE_CHECKING:
    from puicl_model.estimator.ensemble import View
    from puicl_model.estimator.portfolio import Blend, Choice, Portfolio

__all__ = ["LEARNER_MAGNITUDE", "check_values"]

# The largest magnitude a learner's coefficient, intercept or leaf value may have. A fit gives
# far less (a regularized logistic regression on standardized features: units to thousands; a
# boosted leaf: a learning rate times a Newton step), and far more lets a row's log-odds, a
# sum of such values, overflow to ±inf: two folds' +inf and -inf then average to NaN.
LEARNER_MAGNITUDE = 1e12


class _Refused(Exception):
    """A value scoring cannot read: the entry's name and what is wrong with it."""

    def __init__(self, entry: str, problem: str) -> None:
        super().__init__(f"{entry} {problem}")


# ------------------------------------------------------------------------------ values
def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut with an ellipsis past 40 characters (a whole
    number of 10**30 digits must not read as a short one)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _number(entry: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
            above: bool = False, whole: bool = False) -> float:
    """``value`` as a finite number in [``low``, ``high``] (above ``low`` with ``above``;
    a whole number with ``whole``); numpy's scalars count, bools do not."""
    kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
    if not isinstance(value, kinds) or isinstance(value, (bool, np.bool_)):
        raise _Refused(entry, f"is a {type(value).__name__}, not a "
                              f"{'whole number' if whole else 'number'}")
    number = int(value) if whole else float(value)  # (a whole number: exact, of any size)
    if not whole and not math.isfinite(number):
        raise _Refused(entry, f"is {_shown(value)}, not a finite number")
    if number < low or number > high or (above and number <= low):
        bounds = f"above {low:g}" if above and high == math.inf else (
            f"at least {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]")
        raise _Refused(entry, f"is {_shown(value)}, not {bounds}")
    return number


def _array(entry: str, value: Any, *, ndim: int = 1, length: int | None = None,
           kinds: str = "f", low: float = -math.inf, high: float = math.inf,
           above: bool = False, nonempty: bool = False, ordered: bool = False) -> np.ndarray:
    """``value`` as an array of ``ndim`` dimensions (``length`` rows) of ``kinds`` (numpy's
    letters), finite, every value in [``low``, ``high``] (above ``low`` with ``above``), with
    at least one value with ``nonempty``, sorted ascending with ``ordered``."""
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in kinds:
        shape = list(value.shape) if isinstance(value, np.ndarray) else type(value).__name__
        raise _Refused(entry, f"is {shape} of {getattr(value, 'dtype', '-')}, not a "
                              f"{ndim}-D array of {kinds!r} numbers")
    if length is not None and len(value) != length:
        raise _Refused(entry, f"holds {len(value)} rows where {length} belong")
    if nonempty and not value.size:
        raise _Refused(entry, "is empty")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise _Refused(entry, "holds NaN or infinite values")
    if value.size and (value.min() < low or value.max() > high or (above and value.min() <= low)):
        bounds = f"above {low:g}" if above and high == math.inf else f"in [{low:g}, {high:g}]"
        raise _Refused(entry, f"holds {float(value.min()):g} to {float(value.max()):g}, not "
                              f"{bounds}")
    if ordered and value.size > 1 and (np.diff(value, axis=0) < 0).any():
        raise _Refused(entry, "is not sorted")
    return value


def _mapping(entry: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise _Refused(entry, f"is a {type(value).__name__}, not a mapping")
    return value


def _text(entry: str, value: Any, among: tuple[str, ...] | frozenset[str] | None = None) -> str:
    if not isinstance(value, str) or (among is not None and value not in among):
        wanted = "text" if among is None else " or ".join(map(repr, sorted(among)))
        raise _Refused(entry, f"is {_shown(value)}, not {wanted}")
    return value


# ----------------------------------------------------------------------- column encodings
def _column(entry: str, column: Any) -> int:
    """A column encoding as encode() reads it; its width (the features it becomes)."""
    from puicl_model.estimator.column_encoding import _POWER_LAMBDA_BOUND, ColumnEncoding

    if not isinstance(column, ColumnEncoding):
        raise _Refused(entry, f"is a {type(column).__name__}, not a column encoding")
    kind = _text(f"{entry}.kind", column.kind, ("numeric", "categorical"))
    if kind == "numeric":
        _number(f"{entry}.fill", column.fill)
        if column.codes or column.onehot:
            raise _Refused(entry, "is numeric with categories")
        if column.quantiles is not None:
            _array(f"{entry}.quantiles", column.quantiles, nonempty=True, ordered=True)
        if column.power is not None:
            _number(f"{entry}.power", column.power, -_POWER_LAMBDA_BOUND, _POWER_LAMBDA_BOUND)
        # an integer column's values less it, in integer arithmetic, then as float64: the
        # smallest value of an int64 or uint64 column
        offset = _number(f"{entry}.offset", column.offset, whole=True)
        if not -(2**63) <= offset < 2**64:
            raise _Refused(f"{entry}.offset", f"is {_shown(offset)}, beyond any 64-bit integer")
        return column.width
    if column.indicator or column.quantiles is not None or column.power is not None:
        raise _Refused(entry, "is categorical with a numeric column's encoding")
    _number(f"{entry}.missing_code", column.missing_code)
    for category, code in column.codes.items():
        _text(f"{entry}.codes key", category)
        _number(f"{entry}.codes[{category!r:.20}]", code)
    if not all(isinstance(category, str) for category in column.onehot):
        raise _Refused(f"{entry}.onehot", "holds categories that are not text")
    return column.width


def _preprocessor(entry: str, preprocessor: object) -> int:
    """A fitted preprocessor as transform() reads it; the number of features it gives (one
    zero feature where it keeps none)."""
    from puicl_model.estimator.preprocessing import TablePreprocessor

    if not isinstance(preprocessor, TablePreprocessor):
        raise _Refused(entry, f"is a {type(preprocessor).__name__}, not a table preprocessor")
    state = vars(preprocessor)
    required = ("numeric", "categorical", "missing", "columns_", "feature_names_in_",
                "n_features_in_", "is_dataframe_", "keep_", "center_", "scale_", "prescale_")
    absent = [name for name in required if name not in state]
    if absent:
        raise _Refused(entry, f"lacks {', '.join(absent[:3])}")
    _text(f"{entry}.numeric", preprocessor.numeric, ("quantile", "standard", "power"))
    _text(f"{entry}.categorical", preprocessor.categorical, ("onehot", "ordinal", "frequency"))
    _text(f"{entry}.missing", preprocessor.missing, ("median", "median+indicator", "error"))
    if not isinstance(preprocessor.is_dataframe_, bool):
        raise _Refused(f"{entry}.is_dataframe_", "is not true or false")
    columns = preprocessor.columns_
    if not isinstance(columns, list) or not columns:
        raise _Refused(f"{entry}.columns_", "is not a list of column encodings")
    width = sum(_column(f"{entry}.columns_[{number}]", column)
                for number, column in enumerate(columns))
    names = preprocessor.feature_names_in_
    if (not isinstance(names, list) or names != [column.name for column in columns]
            or preprocessor.n_features_in_ != len(columns)
            or type(preprocessor.n_features_in_) is not int):
        raise _Refused(f"{entry}.feature_names_in_", "are not its columns' names")
    moments = state.get("moment_columns_", set())
    if not isinstance(moments, (set, frozenset)) or not moments <= set(names):
        raise _Refused(f"{entry}.moment_columns_", "names no column of it")
    keep = _array(f"{entry}.keep_", preprocessor.keep_, kinds="b", length=width)
    kept = int(np.count_nonzero(keep))
    _array(f"{entry}.center_", preprocessor.center_, length=kept)
    _array(f"{entry}.scale_", preprocessor.scale_, length=kept, low=0.0, above=True)
    _array(f"{entry}.prescale_", preprocessor.prescale_, length=kept, low=0.0, above=True)
    return max(1, kept)


# ------------------------------------------------------------------------------ the table
def _view(entry: str, view: View, with_table: bool) -> int:
    """A view's preprocessor, and with the table its rows (and their ranking scores) of the
    preprocessor's width; the view's width."""
    width = _preprocessor(f"{entry}.preprocessor", view.preprocessor)
    if with_table:
        rows = [_array(f"{entry}.{name}", getattr(view, name), ndim=2, kinds="f")
                for name in ("x_labeled", "x_pool")]
        if any(part.shape[1] != width for part in rows):
            raise _Refused(f"{entry}.x_pool", f"has rows of another width than its {width} "
                                              "features")
        for name, part in (("labeled_score", rows[0]), ("pool_score", rows[1])):
            if getattr(view, name) is not None:
                _array(f"{entry}.{name}", getattr(view, name), length=len(part))
    return width


def _probabilities(entry: str, value: Any, length: int | None = None) -> np.ndarray:
    return _array(entry, value, length=length, low=0.0, high=1.0)


def _folds(entry: str, folds: Any, n_labeled: int, n_pool: int, entropy: int) -> None:
    """The model's cross-fitted scores per fold count: per fold, the probabilities of its
    labeled rows (those :func:`~puicl_model.estimator.prior.fold_of` puts in it) and of the
    pool's ``n_pool`` rows (or of the sample of them a larger pool's folds are scored
    against)."""
    from puicl_model.estimator.prior import PRIOR_POOL_ROWS, fold_of

    for n_folds, per_fold in _mapping(entry, folds).items():
        _number(f"{entry} key", n_folds, 2, max(2, n_labeled // 2), whole=True)
        sizes = np.bincount(fold_of(n_labeled, n_folds, entropy), minlength=n_folds)
        if not isinstance(per_fold, list) or len(per_fold) != n_folds:
            raise _Refused(f"{entry}[{n_folds}]", f"does not hold {n_folds} folds")
        for number, fold in enumerate(per_fold):
            where = f"{entry}[{n_folds}][{number}]"
            if not isinstance(fold, tuple) or len(fold) != 2:
                raise _Refused(where, "is not a pair of arrays")
            _probabilities(f"{where} positives", fold[0], int(sizes[number]))
            _probabilities(f"{where} pool", fold[1])
            if len(fold[1]) not in (n_pool, min(n_pool, PRIOR_POOL_ROWS)):
                raise _Refused(f"{where} pool", f"holds {len(fold[1])} rows, not the pool's "
                                                f"{n_pool} nor a sample of {PRIOR_POOL_ROWS}")


def _scorer(state: Mapping[str, Any], with_table: bool, views: list) -> int | None:
    """The fitted scorer's own entries; the fitted pool's rows (None without the table)."""
    _number("n_held_out_", state.get("n_held_out_"), 0, whole=True)
    entropy = _number("_entropy", state.get("_entropy"), 0, whole=True)
    # every random draw is keyed by the fit's root seed: the planners' and the portfolio's too
    if any(planner.entropy != entropy for planner in state["planners_"]) or (
            state.get("portfolio_") is not None and state["portfolio_"].entropy != entropy):
        raise _Refused("_entropy", "is not the root seed of every pass planner and learner")
    for name in ("n_passes_", "inference_seconds_"):
        if name in state:
            _number(name, state[name], 0)
    for n_folds, estimate in _mapping("_class_prior", state.get("_class_prior", {})).items():
        _number("_class_prior key", n_folds, 1, whole=True)
        _number(f"_class_prior[{n_folds}]", estimate, 0.0, 1.0)
    if not with_table:
        if state.get("_new_row_cut") is not None:
            _number("_new_row_cut", state["_new_row_cut"], 0.0, 1.0)
        return None
    first = views[0]
    width, n_held = first.x_pool.shape[1], state["n_held_out_"]
    in_context = state.get("_held_in_context", False)
    if not isinstance(in_context, bool) or (in_context and n_held == 0):
        raise _Refused("_held_in_context", "is not true (positives held out, in the passes' "
                                           "context) or false")
    # the first view's rows: its labeled ones; its pool, less the held-out positives that
    # follow it there in a folder saved before they stayed in the context
    expected = {"x_labeled_": first.x_labeled.shape,
                "x_pool_": (len(first.x_pool) - (0 if in_context else n_held), width)}
    for name, shape in expected.items():
        rows = _array(name, state[name], ndim=2)
        if rows.shape != shape:
            raise _Refused(name, f"is {list(rows.shape)} where the first view's rows make "
                                 f"{list(shape)}")
    n_pool = len(state["x_pool_"])
    _probabilities("_pool_proba", state.get("_pool_proba"), n_pool)
    held, held_proba = state.get("_x_held"), state.get("_held_proba")
    if (held is None) != (held_proba is None) or (held is None) != (state["n_held_out_"] == 0):
        raise _Refused("_x_held", "and _held_proba, or n_held_out_, disagree on the positives "
                                  "held out")
    if held is not None:
        _array("_x_held", held, ndim=2, length=state["n_held_out_"])
        if held.shape[1] != width:
            raise _Refused("_x_held", "has rows of another width than the first view's")
        _probabilities("_held_proba", held_proba, len(held))
    evidence_pool = state.get("_evidence_pool_proba")
    if (evidence_pool is None) == in_context:
        raise _Refused("_evidence_pool_proba", "and _held_in_context disagree on the evidence's "
                                               "own passes")
    if evidence_pool is not None:
        _probabilities("_evidence_pool_proba", evidence_pool)
        if not 0 < len(evidence_pool) <= n_pool:
            raise _Refused("_evidence_pool_proba", f"holds {len(evidence_pool)} rows, not "
                                                   f"between 1 and the pool's {n_pool}")
    # (as cross_fitted_scores draws and scores them: over the first planner's pool)
    _folds("_held_out", state.get("_held_out", {}), len(first.x_labeled),
           state["planners_"][0].n_pool, state["_entropy"])
    return n_pool


def _classifier(state: Mapping[str, Any], views: list) -> None:
    """The classifier's scikit-learn attributes, against the first view's columns."""
    n_features = views[0].preprocessor.n_features_in_
    if "n_features_in_" in state and state["n_features_in_"] != n_features:
        raise _Refused("n_features_in_", f"is not the {n_features} columns of the first view")
    names = state.get("feature_names_in_")
    if names is not None and (not isinstance(names, np.ndarray) or names.shape != (n_features,)
                              or not all(isinstance(name, str) for name in names.tolist())):
        raise _Refused("feature_names_in_", f"is not {n_features} column names")
    classes = state.get("classes_")
    if classes is not None and (not isinstance(classes, np.ndarray)
                                or classes.tolist() != [0, 1]):
        raise _Refused("classes_", "are not 0 and 1")
    for name in ("n_pool_in_", "n_estimators_"):
        if name in state:
            _number(name, state[name], 0, whole=True)


# -------------------------------------------------------------------------- the portfolio
def _scores(entry: str, scores: Any, length: int | None) -> None:
    for kind, values in _mapping(entry, scores).items():
        _array(f"{entry}[{kind!r:.20}]", values, length=length)


def _choice(entry: str, choice: Choice, members: set[str]) -> None:
    from puicl_model.estimator.portfolio import Choice

    if not isinstance(choice, Choice):
        raise _Refused(entry, f"is a {type(choice).__name__}, not a choice")
    _text(f"{entry}.name", choice.name)
    _text(f"{entry}.reason", choice.reason)
    _number(f"{entry}.n_held_out", choice.n_held_out, 0, whole=True)
    _weights(f"{entry}.weights", choice.weights, members)
    for name, auc in _mapping(f"{entry}.held_out_auc", choice.held_out_auc).items():
        _number(f"{entry}.held_out_auc[{name!r:.20}]", auc, 0.0, 1.0)
    for name, se in _mapping(f"{entry}.lead_se", choice.lead_se).items():
        _number(f"{entry}.lead_se[{name!r:.20}]", se, 0.0)


def _weights(entry: str, weights: Any, members: set[str]) -> None:
    """A blend's weights: members the folder can score, each weighed above 0."""
    if not _mapping(entry, weights):
        raise _Refused(entry, "weigh no member")
    for member, weight in weights.items():
        if member not in members:
            raise _Refused(entry, f"weigh {member!r:.20}, which is neither the model nor a "
                                  "learner the folder holds")
        _number(f"{entry}[{member!r:.20}]", weight, 0.0, above=True)


def _blend(entry: str, blend: Blend, members: set[str]) -> None:
    """A blend as new rows are scored by it: its weights, each weighed member's centre and
    scale (above 0), and the map from its scores to probabilities (sorted, of one length)."""
    from puicl_model.estimator.portfolio import Blend

    if not isinstance(blend, Blend):
        raise _Refused(entry, f"is a {type(blend).__name__}, not a blend")
    _weights(f"{entry}.weights", blend.weights, members)
    standard = _mapping(f"{entry}.standard", blend.standard)
    for member in blend.weights:
        pair = standard.get(member)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise _Refused(f"{entry}.standard[{member!r:.20}]", "is not a (centre, scale) pair")
        _number(f"{entry}.standard[{member!r:.20}] centre", pair[0])
        _number(f"{entry}.standard[{member!r:.20}] scale", pair[1], 0.0, above=True)
    scores = _array(f"{entry}.pool_scores", blend.pool_scores, nonempty=True, ordered=True)
    _array(f"{entry}.pool_proba", blend.pool_proba, length=len(scores), low=0.0, high=1.0,
           ordered=True)


def _learners(entry: str, portfolio: Portfolio) -> set[str]:
    """Each learner's own settings (its kind its key, its folds, its threads, models to
    score with); the members a blend may weigh: the model and these learners."""
    from puicl_model.estimator.learners import LEARNER_TAGS
    from puicl_model.estimator.portfolio import MODEL

    for kind, learner in _mapping(entry, portfolio.learners).items():
        where = f"{entry}[{kind!r:.20}]"
        if kind not in LEARNER_TAGS or learner.kind != kind:
            raise _Refused(where, f"is a learner of kind {learner.kind!r:.20}")
        _number(f"{where}.entropy", learner.entropy, 0, whole=True)
        _number(f"{where}.folds", learner.folds, 2, whole=True)
        try:
            check_thread_count(learner.n_threads, f"{where}.n_threads")
        except ValueError as err:
            raise _Refused(f"{where}.n_threads", str(err).split(" ", 1)[1]) from None
        if not learner.models_:
            raise _Refused(f"{where}.models_", "is empty: the learner scores no row")
        for number, model in enumerate(learner.models_):
            for name in ("coef_", "intercept_", "baseline", "value"):  # (what is summed)
                if isinstance(getattr(model, name, None), np.ndarray):
                    _array(f"{where}.models_[{number}].{name}", getattr(model, name),
                           ndim=getattr(model, name).ndim, low=-LEARNER_MAGNITUDE,
                           high=LEARNER_MAGNITUDE)
    return {MODEL, *portfolio.learners}


def _portfolio(entry: str, portfolio: Portfolio, rows: tuple[int, int] | None,
               n_held: int) -> None:
    """The portfolio as new rows are scored by it; with the table (``rows``: the fitted
    table's labeled and pool rows), its own rows, ``n_held`` of the labeled ones held out of
    the passes, and every learner's scores of them."""
    from puicl_model.estimator.learners import LEARNER_TAGS
    from puicl_model.estimator.portfolio import MODEL, blends_for

    width = _preprocessor(f"{entry}.encoder", portfolio.encoder)
    _number(f"{entry}.entropy", portfolio.entropy, 0, whole=True)
    _number(f"{entry}.z", portfolio.z, 0.0)
    try:
        check_thread_count(portfolio.n_threads)
    except ValueError as err:
        raise _Refused(f"{entry}.n_threads", str(err).split(" ", 1)[1]) from None
    members = portfolio.members
    if (not isinstance(members, tuple) or len(set(members)) != len(members)
            or not set(members) <= {MODEL, *LEARNER_TAGS}):
        raise _Refused(f"{entry}.members", f"are {members!r:.60}, not the model and learners")
    try:
        blends_for(members, _text(f"{entry}.fallback", portfolio.fallback))
    except ValueError:
        raise _Refused(f"{entry}.fallback", f"{portfolio.fallback!r:.30} is not a blend of its "
                                            "members") from None
    scorable = _learners(f"{entry}.learners", portfolio)
    if (portfolio.choice is None) != (portfolio.blend is None):
        raise _Refused(f"{entry}.choice", "and its blend are not both there")
    if portfolio.choice is not None:
        _choice(f"{entry}.choice", portfolio.choice, scorable)
        _blend(f"{entry}.blend", portfolio.blend, scorable)
        if dict(portfolio.choice.weights) != dict(portfolio.blend.weights):
            raise _Refused(f"{entry}.blend", "weighs other members than its choice")
    if rows is not None:
        if portfolio.n_held != n_held:
            raise _Refused(f"{entry}.n_held", f"is {_shown(portfolio.n_held)}, not the "
                                              f"{n_held} positives held out of the passes")
        for name, count in zip(("x_labeled", "x_pool"), rows, strict=True):
            # the labeled rows: the passes' context, then those held out of it
            _array(f"{entry}.{name}", getattr(portfolio, name), ndim=2, length=count)
            if getattr(portfolio, name).shape[1] != width:
                raise _Refused(f"{entry}.{name}", f"has rows of another width than its "
                                                  f"encoder's {width} features")
    _scores(f"{entry}.labeled_scores", portfolio.labeled_scores, rows and rows[0])
    _scores(f"{entry}.pool_scores", portfolio.pool_scores, rows and rows[1])
    _scores(f"{entry}.member_pool_scores", portfolio.member_pool_scores, None)


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
            _portfolio("portfolio_", state["portfolio_"], rows, n_held)
    except _Refused as refused:
        raise SavedModelError(f"{path}: {refused}; not what puicl saves") from None
