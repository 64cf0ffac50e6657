"""The portfolio's rule: the blends a table chooses from, and which of them its held-out
positives pick (:func:`choose`), with no negative label.

Under SCAR, held-out labeled positives are distributed as the pool's positives, so a score's
AUC of held-out positives against the pool is ``(1 − π)/2 + π · AUC`` (Jain, White & Radivojac,
arXiv 1702.00518): the candidate that ranks held-out positives highest ranks the pool best. A
difference in held-out AUC is π times the difference in true AUC, read off a few hundred
positives, so a candidate replaces the fallback only where it leads it by more than
:data:`EVIDENCE_Z` standard errors of the paired difference (DeLong, DeLong & Clarke-Pearson,
Biometrics 1988); of those that do, the highest held-out AUC is chosen.
:mod:`puicl_model.estimator.portfolio` fits the members and applies the choice.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import rankdata

from puicl_model.estimator.learners import BAGGED, BAGGED_BOOSTED, LOGISTIC
from puicl_model.passes.scores import NonFiniteScoresError

MODEL = "model"
# the members a fit runs (docs/decisions.md, "A portfolio chosen per table"). BOOSTED, the
# boosting of labeled against unlabeled rows that PU bagging replaced, stays a learner that the
# rule's study runs beside them and that classifiers saved with it score new rows with
MEMBERS = (MODEL, LOGISTIC, BAGGED)
# the members where evidence is read (positives held out of the passes, or the class prior's
# folds on a pool of shared contexts): boosted trees in the same bags join
# (learners.BAGGED_BOOSTED), for the evidence to tell from the forests where they rank better
MEMBERS_WITH_EVIDENCE = (*MEMBERS, BAGGED_BOOSTED)


def candidates(members: Sequence[str]) -> dict[str, dict[str, float]]:
    """The blends the choice is made from: every non-empty set of ``members``, each weighted
    equally on its standardized scores, named by its members joined with "+"."""
    return {"+".join(chosen): {member: 1.0 / size for member in chosen}
            for size in range(1, len(members) + 1)
            for chosen in itertools.combinations(members, size)}


# the candidate that stands where the evidence does not clearly favour another: the three
# members with the model weighed more than both learners together (the three in thirds cost 0.01
# AUC against the model alone where the model is clearly the best member, and this blend does
# not: docs/decisions.md, "A portfolio chosen per table"); see fallback_on_evidence
FALLBACK = "model-weighted"
FALLBACK_WEIGHTS: Mapping[str, float] = {MODEL: 0.6, LOGISTIC: 0.2, BAGGED: 0.2}
FALLBACK_WITH_HELD_OUT = "logistic"


def fallback_weights(trees: str = BAGGED) -> dict[str, float]:
    """:data:`FALLBACK_WEIGHTS` with the bag learner ``trees`` in the tree member's place
    (where :data:`FALLBACK` stands, :func:`stronger_trees` names it)."""
    return {(trees if member == BAGGED else member): weight
            for member, weight in FALLBACK_WEIGHTS.items()}


def blends_for(members: Sequence[str], fallback: str) -> dict[str, Mapping[str, float]]:
    """The candidates a portfolio of ``members`` chooses from with ``fallback`` standing: the
    even blends of :func:`candidates`, and :data:`FALLBACK`'s weights where it stands."""
    blends: dict[str, Mapping[str, float]] = dict(candidates(members))
    if fallback == FALLBACK and set(FALLBACK_WEIGHTS) <= set(members):
        blends[FALLBACK] = dict(FALLBACK_WEIGHTS)
    if fallback not in blends:
        raise ValueError(f"the fallback {fallback!r} is not a blend of {', '.join(members)}")
    return blends


# what a fit with the shipped members chooses from where the fallback is model-weighted
CANDIDATES: Mapping[str, Mapping[str, float]] = blends_for(MEMBERS, FALLBACK)

# why a table without held-out positives takes the fallback unread
NO_EVIDENCE = ("below the hold-out threshold, on a pool of at most 2,000 rows, the fallback stands "
               "with no evidence read: on the development suite the class prior's folds changed "
               "almost no choice there, for one to two times the fit (docs/decisions.md)")

# the standard errors of paired held-out AUC difference a candidate must lead the fallback by:
# lower bars followed the noise more often than they found a better one (docs/decisions.md)
EVIDENCE_Z = 3.0
# the standard errors by which the boosted bags' out-of-fold AUC must lead the forests' to take
# their place in a standing fallback (stronger_trees): both are learners weighed 0.2 there, so a
# wrong pick costs little, and the forests' 3 SE left the boosted bags out of wide tables where
# they rank the pool 0.05-0.10 better (docs/decisions.md, "The fallback's trees")
TREES_Z = 2.0
# the model's feature groups from which the boosted bags fill the fallback's tree place whatever
# their own lead (Portfolio._fallback_trees), with or without evidence: the forests draw the
# square root of the columns at each split, so among many uninformative columns their trees
# rarely split on the signal, and a few hundred labeled positives cannot show the trees' lead by
# TREES_Z. The development suite holds no table this wide (at most 3 groups); the generated wide
# tables gained, and its tables widened with 100 uninformative columns gained at π 0.5 and moved
# by noise at π 0.2 (docs/decisions.md, "The wide tables' trees")
WIDE_FROM_GROUPS = 4
# the standard errors by which the boosted bags' held-out AUC must lead the model's for a
# choice that weighs both, on a table whose boosted bags clearly lead the forests
# (stronger_trees), to give way to the boosted bags alone (trees_over_weak_model): a point
# estimate, as the fallback's own model-or-logistic test (fallback_on_evidence). The lead
# itself tells little: where it changed a standing fallback it was 0.1-1.5 SE on the generated
# tables' gains and 0.3-1.3 on the development suite's losses; the trees' own lead over the
# forests told them apart (docs/decisions.md, "The boosted bags where the model trails them")
WEAK_MODEL_Z = 0.0
# a table with evidence reads more of it (held-out positives and pool rows up to evidence_rows'
# MOST_JUDGED_POOL_ROWS; on the folds, pool rows up to the folds' sample) while the candidate of
# highest held-out AUC is not the choice and leads the fallback by more than this many standard
# errors and not by EVIDENCE_Z: a lead the samples read so far cannot settle (undecided)
READ_MORE_Z = 1.0


# ----------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class Evidence:
    """Per fold of held-out positives (one held out of the passes, or the class prior's folds):
    each member's log-odds of them (``held``) and of the pool (``pool``)."""

    held: Sequence[Mapping[str, np.ndarray]]
    pool: Sequence[Mapping[str, np.ndarray]]


def standardizer(values: np.ndarray) -> tuple[float, float]:
    scale = float(values.std())
    return float(values.mean()), scale if scale > 1e-12 else 1.0


def blended(weights: Mapping[str, float], scores: Mapping[str, np.ndarray],
             standard: Mapping[str, tuple[float, float]]) -> np.ndarray:
    total = 0.0
    for member, weight in weights.items():
        centre, scale = standard[member]
        total = total + weight * (np.asarray(scores[member], dtype=np.float64) - centre) / scale
    return np.asarray(total, dtype=np.float64)


# an AUC of held-out rows against pool rows, and DeLong's placement values of each (_placements)
Placed = tuple[float, np.ndarray, np.ndarray]


def _placements(held: np.ndarray, pool: np.ndarray) -> Placed:
    """The AUC of ``held`` against ``pool`` (ties ½) and DeLong's placement values: per held
    row the share of the pool below it, per pool row the share of held rows above it."""
    n_h, n_p = len(held), len(pool)
    ranks = rankdata(np.r_[held, pool])
    held_in_all, pool_in_all = ranks[:n_h], ranks[n_h:]
    held_in_held, pool_in_pool = rankdata(held), rankdata(pool)
    v_held = (held_in_all - held_in_held) / n_p
    v_pool = 1.0 - (pool_in_all - pool_in_pool) / n_h
    return float(v_held.mean()), v_held, v_pool


def _paired_variances(placed: Placed, base: Placed) -> tuple[float, float]:
    """The held rows' and the pool rows' shares of the variance of the AUC difference
    ``placed`` − ``base`` (DeLong's, on the same rows): each the variance of the paired
    placement differences over its rows' count."""
    _, held, pool = placed
    _, base_held, base_pool = base
    return (float(np.var(held - base_held, ddof=1)) / len(held),
            float(np.var(pool - base_pool, ddof=1)) / len(pool))


@dataclass(frozen=True)
class Choice:
    """What the portfolio chose on a table, and the evidence it read."""

    name: str  # a key of candidates(members)
    weights: Mapping[str, float]
    held_out_auc: Mapping[str, float]  # per candidate, mean over the folds
    lead_se: Mapping[str, float]  # per candidate: the SE of its held-out AUC minus the fallback's
    n_held_out: int
    reason: str

    @property
    def read_evidence(self) -> bool:
        """Whether the choice read held-out evidence (small tables take the fallback unread)."""
        return bool(self.held_out_auc)

    def describe(self) -> str:
        members = ", ".join(f"{member} {weight:.2f}" for member, weight in self.weights.items())
        if not self.read_evidence:
            return f"{self.name} ({members}); no evidence read"
        return (f"{self.name} ({members}); held-out AUC "
                + ", ".join(f"{name} {auc:.3f}" for name, auc in self.held_out_auc.items()))


def held_out_aucs(evidence: Evidence, members: Sequence[str], fallback: str = FALLBACK,
                  blends: Mapping[str, Mapping[str, float]] | None = None,
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """Each candidate's held-out AUC (mean over folds) and the standard error of its paired
    difference with ``fallback``'s (DeLong; the folds' held-out rows are disjoint, their pool
    rows the same, so the pool's share of the variance is not divided by the folds).
    ``blends``: the candidates (default: :func:`blends_for` ``members`` and ``fallback``)."""
    blends = blends_for(members, fallback) if blends is None else blends
    folds = len(evidence.held)
    aucs = {name: 0.0 for name in blends}
    held_var = {name: 0.0 for name in blends}
    pool_var = {name: 0.0 for name in blends}
    for held, pool in zip(evidence.held, evidence.pool, strict=True):
        standard = {member: standardizer(np.asarray(pool[member], dtype=np.float64))
                    for member in members}
        placed = {name: _placements(blended(weights, held, standard),
                                    blended(weights, pool, standard))
                  for name, weights in blends.items()}
        for name, scored in placed.items():
            held_share, pool_share = _paired_variances(scored, placed[fallback])
            aucs[name] += scored[0] / folds
            held_var[name] += held_share / folds**2
            pool_var[name] += pool_share / folds
    se = {name: float(np.sqrt(held_var[name] + pool_var[name])) for name in blends}
    return aucs, se


def stronger_trees(labeled: Mapping[str, np.ndarray], pool: Mapping[str, np.ndarray],
                   z: float = TREES_Z) -> tuple[str, float]:
    """The bag learner that fills the fallback's tree place where the evidence leaves
    :data:`FALLBACK` standing (the choice itself is read with the forests), and the lead
    behind it in standard errors: the boosted bags where the AUC of their out-of-fold scores
    of every labeled positive (``labeled``) against their scores of the pool rows each bag
    left out (``pool``) leads the forests' by more than ``z`` standard errors of the paired
    difference; the forests otherwise, or where the boosted bags were not fitted. Neither
    needs a pass of the model, so every labeled positive and pool row is read: the forests'
    few features per split miss the signal of a table with many uninformative columns, and
    the boosted bags fit a strong signal more closely (docs/decisions.md, "The fallback's
    trees")."""
    if BAGGED_BOOSTED not in labeled or BAGGED not in labeled:
        return BAGGED, 0.0
    forest = _placements(labeled[BAGGED], pool[BAGGED])
    boosted = _placements(labeled[BAGGED_BOOSTED], pool[BAGGED_BOOSTED])
    se = float(np.sqrt(sum(_paired_variances(boosted, forest))))
    lead_se = (boosted[0] - forest[0]) / max(se, 1e-12)
    return (BAGGED_BOOSTED if np.isfinite(lead_se) and lead_se > z else BAGGED), lead_se


def fallback_on_evidence(evidence: Evidence, members: Sequence[str]) -> str:
    """A table with held-out positives: :data:`FALLBACK` where the model's held-out AUC is
    above the logistic learner's, else the logistic learner (no model pass over the pool)."""
    if not set(FALLBACK_WEIGHTS) <= set(members):
        return FALLBACK_WITH_HELD_OUT
    pair = {MODEL: {MODEL: 1.0}, LOGISTIC: {LOGISTIC: 1.0}}
    aucs, _ = held_out_aucs(evidence, (MODEL, LOGISTIC), LOGISTIC, pair)
    return FALLBACK if aucs[MODEL] > aucs[LOGISTIC] else FALLBACK_WITH_HELD_OUT


def trees_over_weak_model(choice: Choice, evidence: Evidence, trees_lead_se: float,
                          z: float = WEAK_MODEL_Z) -> tuple[Choice, float]:
    """``choice`` once the evidence is read as far as it needs, and the boosted bags' lead over
    the model alone in standard errors of their paired held-out AUC difference. Where the choice
    weighs the model beside the boosted bags (the standing fallback with them in its tree
    place, or a blend the evidence chose), the boosted bags' own evidence over every labeled
    positive clearly leads the forests' (``trees_lead_se``, :func:`stronger_trees`'s lead, above
    :data:`TREES_Z`) and they rank the held-out positives above the model alone by more than
    ``z`` standard errors, the boosted bags stand alone: on a table where boosting fits the
    signal and the model trails it, a blend that weighs the model only dilutes them
    (docs/decisions.md, "The boosted bags where the model trails them"). The samples are not
    read again: they stopped doubling on the choice's own rule."""
    weights = choice.weights
    if MODEL not in weights or BAGGED_BOOSTED not in weights or not trees_lead_se > TREES_Z:
        return choice, 0.0
    pair = {MODEL: {MODEL: 1.0}, BAGGED_BOOSTED: {BAGGED_BOOSTED: 1.0}}
    aucs, se = held_out_aucs(evidence, (MODEL, BAGGED_BOOSTED), MODEL, pair)
    lead_se = (aucs[BAGGED_BOOSTED] - aucs[MODEL]) / max(se[BAGGED_BOOSTED], 1e-12)
    if not (np.isfinite(lead_se) and lead_se > z):
        return choice, lead_se
    return replace(choice, name=BAGGED_BOOSTED, weights={BAGGED_BOOSTED: 1.0}, reason=(
        f"{choice.reason}; the boosted bags alone rank the held-out positives above the model "
        f"alone ({lead_se:.1f} standard errors) and their own evidence leads the forests' "
        f"({trees_lead_se:.1f}), so they stand alone in place of {choice.name}")), lead_se


def clearly_leading(aucs: Mapping[str, float], se: Mapping[str, float], fallback: str,
                    z: float) -> list[str]:
    """The candidates whose held-out AUC leads ``fallback``'s by more than ``z`` standard
    errors of their paired difference."""
    return [name for name in aucs
            if name != fallback and aucs[name] - aucs[fallback] > z * se[name]]


def choose(evidence: Evidence, members: Sequence[str], *, fallback: str = FALLBACK,
           z: float = EVIDENCE_Z) -> Choice:
    """Of the candidates leading ``fallback`` by more than ``z`` standard errors of the paired
    difference, the one of highest held-out AUC; ``fallback`` where none does. (The candidate
    of highest AUC need not be among them: a blend that shares members with the fallback moves
    with it, and its lead is read more surely than a lone member's.)"""
    blends = blends_for(members, fallback)
    aucs, se = held_out_aucs(evidence, members, fallback, blends)
    # a NaN AUC compares false with everything, so max() and the lead test would let it
    # stand (as the fallback, or as the first candidate): scores that give one are refused
    damaged = [name for name, auc in aucs.items() if not np.isfinite(auc)]
    if damaged:
        raise NonFiniteScoresError(
            f"the held-out AUC of {', '.join(damaged)} is NaN: a member's scores are NaN or "
            "infinite, and no blend is chosen on them")
    leading = clearly_leading(aucs, se, fallback, z)
    n_held = sum(len(next(iter(held.values()))) for held in evidence.held)
    if leading:
        best = max(leading, key=lambda name: aucs[name])
        lead = aucs[best] - aucs[fallback]
        name, reason = best, (f"{best} leads {fallback} by {lead:.4f} held-out AUC, "
                              f"{lead / max(se[best], 1e-12):.1f} standard errors")
    else:
        name, reason = fallback, (f"no candidate leads {fallback} by more than {z:g} standard "
                                  "errors of held-out AUC")
    return Choice(name, dict(blends[name]), aucs, se, n_held, reason)


def undecided(choice: Choice, fallback: str, z: float = EVIDENCE_Z) -> bool:
    """Whether the candidate of highest held-out AUC is not the choice while it leads
    ``fallback`` by more than :data:`READ_MORE_Z` standard errors but not by ``z``: more
    evidence may settle it. That holds where the fallback stands, and where a blend that clears
    the bar stands below a candidate that does not yet: a blend sharing the fallback's members
    clears it on fewer rows than a lone member, and on the first samples its lead would
    otherwise decide against a member that ranks the pool better (docs/decisions.md, "The large
    tables' rule")."""
    aucs, se = choice.held_out_auc, choice.lead_se
    if not aucs:
        return False
    best = max(aucs, key=lambda name: aucs[name])
    if best in (choice.name, fallback):
        return False
    lead = aucs[best] - aucs[fallback]
    return READ_MORE_Z * se[best] < lead <= z * se[best]
