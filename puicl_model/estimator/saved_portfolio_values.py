"""The values of a saved classifier's portfolio (:func:`check_portfolio`, called by
:func:`puicl_model.estimator.saved_values.check_values`): its learners' settings and summed
values, its choice and blend against the members the folder can score, and, with the table,
its rows and every learner's scores of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_common.runtime import check_thread_count
from puicl_model.estimator.saved_primitives import (
    Refused,
    check_array,
    check_mapping,
    check_number,
    check_text,
    shown,
)

if TYPE_CHECKING:
    from puicl_model.estimator.portfolio import Blend, Choice, Portfolio

__all__ = ["LEARNER_MAGNITUDE", "check_portfolio"]

# The largest magnitude a learner's coefficient, intercept or leaf value may have. A fit gives
# far less (a regularized logistic regression on standardized features: units to thousands; a
# boosted leaf: a learning rate times a Newton step), and far more lets a row's log-odds, a
# sum of such values, overflow to ±inf: two folds' +inf and -inf then average to NaN.
LEARNER_MAGNITUDE = 1e12


def _scores(entry: str, scores: Any, length: int | None) -> None:
    for kind, values in check_mapping(entry, scores).items():
        check_array(f"{entry}[{kind!r:.20}]", values, length=length)


def _choice(entry: str, choice: Choice, members: set[str]) -> None:
    from puicl_model.estimator.portfolio import Choice

    if not isinstance(choice, Choice):
        raise Refused(entry, f"is a {type(choice).__name__}, not a choice")
    check_text(f"{entry}.name", choice.name)
    check_text(f"{entry}.reason", choice.reason)
    check_number(f"{entry}.n_held_out", choice.n_held_out, 0, whole=True)
    _weights(f"{entry}.weights", choice.weights, members)
    for name, auc in check_mapping(f"{entry}.held_out_auc", choice.held_out_auc).items():
        check_number(f"{entry}.held_out_auc[{name!r:.20}]", auc, 0.0, 1.0)
    for name, se in check_mapping(f"{entry}.lead_se", choice.lead_se).items():
        check_number(f"{entry}.lead_se[{name!r:.20}]", se, 0.0)


def _weights(entry: str, weights: Any, members: set[str]) -> None:
    """A blend's weights: members the folder can score, each weighed above 0."""
    if not check_mapping(entry, weights):
        raise Refused(entry, "weigh no member")
    for member, weight in weights.items():
        if member not in members:
            raise Refused(entry, f"weigh {member!r:.20}, which is neither the model nor a "
                                  "learner the folder holds")
        check_number(f"{entry}[{member!r:.20}]", weight, 0.0, above=True)


def _blend(entry: str, blend: Blend, members: set[str]) -> None:
    """A blend as new rows are scored by it: its weights, each weighed member's centre and
    scale (above 0), and the map from its scores to probabilities (sorted, of one length)."""
    from puicl_model.estimator.portfolio import Blend

    if not isinstance(blend, Blend):
        raise Refused(entry, f"is a {type(blend).__name__}, not a blend")
    _weights(f"{entry}.weights", blend.weights, members)
    standard = check_mapping(f"{entry}.standard", blend.standard)
    for member in blend.weights:
        pair = standard.get(member)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise Refused(f"{entry}.standard[{member!r:.20}]", "is not a (centre, scale) pair")
        check_number(f"{entry}.standard[{member!r:.20}] centre", pair[0])
        check_number(f"{entry}.standard[{member!r:.20}] scale", pair[1], 0.0, above=True)
    scores = check_array(f"{entry}.pool_scores", blend.pool_scores, nonempty=True, ordered=True)
    check_array(f"{entry}.pool_proba", blend.pool_proba, length=len(scores), low=0.0, high=1.0,
           ordered=True)


def _learners(entry: str, portfolio: Portfolio) -> set[str]:
    """Each learner's own settings (its kind its key, its folds, its threads, models to
    score with); the members a blend may weigh: the model and these learners."""
    from puicl_model.estimator.learners import LEARNER_TAGS
    from puicl_model.estimator.portfolio import MODEL

    for kind, learner in check_mapping(entry, portfolio.learners).items():
        where = f"{entry}[{kind!r:.20}]"
        if kind not in LEARNER_TAGS or learner.kind != kind:
            raise Refused(where, f"is a learner of kind {learner.kind!r:.20}")
        check_number(f"{where}.entropy", learner.entropy, 0, whole=True)
        check_number(f"{where}.folds", learner.folds, 2, whole=True)
        try:
            check_thread_count(learner.n_threads, f"{where}.n_threads")
        except ValueError as err:
            raise Refused(f"{where}.n_threads", str(err).split(" ", 1)[1]) from None
        if not learner.models_:
            raise Refused(f"{where}.models_", "is empty: the learner scores no row")
        for number, model in enumerate(learner.models_):
            for name in ("coef_", "intercept_", "baseline", "value"):  # (what is summed)
                if isinstance(getattr(model, name, None), np.ndarray):
                    check_array(f"{where}.models_[{number}].{name}", getattr(model, name),
                           ndim=getattr(model, name).ndim, low=-LEARNER_MAGNITUDE,
                           high=LEARNER_MAGNITUDE)
    return {MODEL, *portfolio.learners}


def check_portfolio(entry: str, portfolio: Portfolio, width: int, rows: tuple[int, int] | None,
                    n_held: int) -> None:
    """The portfolio as new rows are scored by it (``width``: its encoder's features); with
    the table (``rows``: the fitted table's labeled and pool rows), its own rows, ``n_held`` of the
    labeled ones held out of the passes, and every learner's scores of them."""
    from puicl_model.estimator.learners import LEARNER_TAGS
    from puicl_model.estimator.portfolio import MODEL, blends_for

    check_number(f"{entry}.entropy", portfolio.entropy, 0, whole=True)
    check_number(f"{entry}.z", portfolio.z, 0.0)
    try:
        check_thread_count(portfolio.n_threads)
    except ValueError as err:
        raise Refused(f"{entry}.n_threads", str(err).split(" ", 1)[1]) from None
    members = portfolio.members
    if (not isinstance(members, tuple) or len(set(members)) != len(members)
            or not set(members) <= {MODEL, *LEARNER_TAGS}):
        raise Refused(f"{entry}.members", f"are {members!r:.60}, not the model and learners")
    try:
        blends_for(members, check_text(f"{entry}.fallback", portfolio.fallback))
    except ValueError:
        raise Refused(f"{entry}.fallback", f"{portfolio.fallback!r:.30} is not a blend of its "
                                            "members") from None
    scorable = _learners(f"{entry}.learners", portfolio)
    if (portfolio.choice is None) != (portfolio.blend is None):
        raise Refused(f"{entry}.choice", "and its blend are not both there")
    if portfolio.choice is not None:
        _choice(f"{entry}.choice", portfolio.choice, scorable)
        _blend(f"{entry}.blend", portfolio.blend, scorable)
        if dict(portfolio.choice.weights) != dict(portfolio.blend.weights):
            raise Refused(f"{entry}.blend", "weighs other members than its choice")
    if rows is not None:
        if portfolio.n_held != n_held:
            raise Refused(f"{entry}.n_held", f"is {shown(portfolio.n_held)}, not the "
                                              f"{n_held} positives held out of the passes")
        for name, count in zip(("x_labeled", "x_pool"), rows, strict=True):
            # the labeled rows: the passes' context, then those held out of it
            check_array(f"{entry}.{name}", getattr(portfolio, name), ndim=2, length=count)
            if getattr(portfolio, name).shape[1] != width:
                raise Refused(f"{entry}.{name}", f"has rows of another width than its "
                                                  f"encoder's {width} features")
    _scores(f"{entry}.labeled_scores", portfolio.labeled_scores, rows and rows[0])
    _scores(f"{entry}.pool_scores", portfolio.pool_scores, rows and rows[1])
    _scores(f"{entry}.member_pool_scores", portfolio.member_pool_scores, None)
