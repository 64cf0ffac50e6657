"""The per-table portfolio: PU learners beside the model, the blend of them chosen per table on
held-out labeled positives, with no negative label.

Why. A forward pass sees a bounded view of the table (:mod:`puicl_model.passes.planning`), and on
some tables a classical learner fitted on every row ranks the pool better: a linear one where the
signal is linear and the labeled rows are many, a tree learner where the signal lies in
interactions or thresholds (docs/classifier.md, "Tables of every size"). The portfolio runs
such learners beside the model and lets each table say which to trust.

Members. ``model`` (the passes' P(y = 1)), ``logistic`` (a logistic regression of labeled (1)
against unlabeled (0) rows) and ``bagged`` (PU bagging over small random forests: each bag fits
the labeled positives against as many pool rows drawn at random), and where positives are
held out or the class prior's folds are read, and on wide tables, ``bagged-boosted`` (the
same bags over short boostings), the
learners on an encoding of their own (:func:`learner_encoding`: one-hot categories,
standardized numbers, missing-value indicators) and scored out of fold over every row, so that
no row is scored by a learner trained on it (:mod:`puicl_model.estimator.learners`). Under
SCAR, P(labeled | x) ranks rows as P(y = 1 | x) does (Elkan & Noto, KDD 2008).

Evidence, on tables with at least ``MIN_LABELED_FOR_HOLD_OUT`` (600) labeled positives: a
fifth of them, scored by the model's passes that set them apart from their context, and for
the learners their out-of-fold scores, read against a seeded sample of the pool's rows
(:mod:`puicl_model.estimator.evidence_rows`), a larger one while the choice is close
(:func:`undecided`). Under SCAR such positives are distributed as the
pool's positives, so for any score the AUC of held-out positives against the pool is
``(1 − π)/2 + π · AUC`` (Jain, White & Radivojac, arXiv 1702.00518), with AUC the score's true
positive-against-negative AUC on the pool: the candidate that ranks held-out positives highest
ranks the pool best. Smaller tables whose pool has more than 2,000 rows read the class prior's
cross-fitted folds (:mod:`puicl_model.estimator.prior`): every labeled positive, scored by passes
without its fold, against a seeded sample of the pool (:func:`~.portfolio_gate.reads_folds`).
:meth:`Portfolio.choose_on` reads either kind.

The rule (:mod:`puicl_model.estimator.portfolio_rule`). A difference in held-out AUC is π times
the difference in true AUC, read off a few hundred positives: at small π or with few positives
it is mostly noise. So a candidate replaces the fallback only where it leads it by more than
:data:`EVIDENCE_Z` standard errors of the paired difference (DeLong, DeLong & Clarke-Pearson,
Biometrics 1988), and of the candidates that do, the highest held-out AUC is chosen. On tables
with held-out positives the fallback is :data:`FALLBACK` where the model's held-out AUC is above
the logistic learner's, else the logistic learner (:func:`fallback_on_evidence`); on the folds
the fallback is :data:`FALLBACK`. Where :data:`FALLBACK` stands on either kind, the boosted
bags take the forests' place in it if their own out-of-fold evidence clearly leads
(:func:`~.portfolio_rule.stronger_trees`), and always on a table the model reads in
:data:`~.portfolio_rule.WIDE_FROM_GROUPS` feature groups or more, where they join with or
without evidence; once the evidence is read, a choice that weighs the model beside them gives
way to them alone where they clearly lead the forests and the model ranks the held-out
positives below them (:meth:`Portfolio.settle`). Smaller pools below the threshold take it with
no evidence read (:meth:`Portfolio.choose_fallback`), with the boosted bags in the forests'
place on a wide table.

Probabilities. The chosen blend orders the pool; each pool row gets the model's pool probability
of the same rank (a monotone recalibration that keeps the model's distribution of P(y = 1) over
the pool, so ``predict`` and π̂ mean what they meant). A new row's probability is read off that
map at its blended score. The model alone keeps its own probabilities, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from puicl_model.estimator.evidence_rows import (
    JUDGED_HELD_OUT,
    JUDGED_POOL_ROWS,
    HeldRows,
    held_out_rows,
    judged_held_rows,
    judged_pool_rows,
)
from puicl_model.estimator.learners import (
    BAG_KINDS,
    BAGGED,
    BAGGED_BOOSTED,
    BOOSTED,
    BOOSTED_BAGS_CHOSEN,
    LOGISTIC,
    CrossFittedLearner,
    bag_count,
    encoded_table,
    learner_encoding,
    log_odds,
)
from puicl_model.estimator.portfolio_gate import (
    MAX_HELD_OUT,
    MIN_LABELED_FOR_HOLD_OUT,
    MIN_LABELED_FOR_PORTFOLIO,
    MIN_POOL_FOR_PORTFOLIO,
)
from puicl_model.estimator.portfolio_rule import (
    CANDIDATES,
    EVIDENCE_Z,
    FALLBACK,
    FALLBACK_WEIGHTS,
    FALLBACK_WITH_HELD_OUT,
    MEMBERS,
    MEMBERS_WITH_EVIDENCE,
    MODEL,
    NO_EVIDENCE,
    READ_MORE_Z,
    WIDE_FROM_GROUPS,
    Choice,
    Evidence,
    blended,
    blends_for,
    candidates,
    choose,
    fallback_on_evidence,
    fallback_weights,
    held_out_aucs,
    standardizer,
    stronger_trees,
    trees_over_weak_model,
    undecided,
)

__all__ = [
    "BAGGED",
    "BAGGED_BOOSTED",
    "BOOSTED",
    "CANDIDATES",
    "EVIDENCE_Z",
    "FALLBACK",
    "FALLBACK_WEIGHTS",
    "FALLBACK_WITH_HELD_OUT",
    "JUDGED_HELD_OUT",
    "JUDGED_POOL_ROWS",
    "LOGISTIC",
    "MAX_HELD_OUT",
    "MEMBERS",
    "MEMBERS_WITH_EVIDENCE",
    "MIN_LABELED_FOR_HOLD_OUT",
    "MIN_LABELED_FOR_PORTFOLIO",
    "MIN_POOL_FOR_PORTFOLIO",
    "MODEL",
    "READ_MORE_Z",
    "Blend",
    "Choice",
    "CrossFittedLearner",
    "Evidence",
    "Portfolio",
    "blends_for",
    "candidates",
    "choose",
    "fallback_on_evidence",
    "held_out_aucs",
    "held_out_rows",
    "judged_held_rows",
    "judged_pool_rows",
    "learner_encoding",
    "undecided",
]

# -------------------------------------------------------------------------------- blend
@dataclass(frozen=True)
class Blend:
    """The chosen blend, standardized on the pool, and the map from its scores to P(y = 1)."""

    weights: Mapping[str, float]
    standard: Mapping[str, tuple[float, float]]  # per weighted member: (centre, scale) on the pool
    pool_scores: np.ndarray  # the pool's blended scores, sorted
    pool_proba: np.ndarray  # the model's P(y = 1) of the pool, sorted

    @property
    def model_alone(self) -> bool:
        return dict(self.weights) == {MODEL: 1.0}

    @classmethod
    def on_pool(cls, weights: Mapping[str, float], pool: Mapping[str, np.ndarray],
                model_pool_proba: np.ndarray) -> Blend:
        """The blend of ``weights`` standardized on the pool's scores (log-odds per member), its
        probabilities keyed to the model's pool probabilities ``model_pool_proba``."""
        standard = {member: standardizer(np.asarray(pool[member], dtype=np.float64))
                    for member in weights}
        return cls(dict(weights), standard,
                   np.sort(blended(weights, pool, standard), kind="stable"),
                   np.sort(np.asarray(model_pool_proba, dtype=np.float64), kind="stable"))

    def score(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return blended(self.weights, scores, self.standard)

    def proba(self, scores: Mapping[str, np.ndarray], model_proba: np.ndarray | None = None,
              ) -> np.ndarray:
        """P(y = 1) of rows from their members' log-odds: the pool's probability at the same
        blended score (interpolated between pool rows); the model alone: ``model_proba``."""
        if self.model_alone and model_proba is not None:
            return np.asarray(model_proba, dtype=np.float64)
        return np.interp(self.score(scores), self.pool_scores, self.pool_proba)


# ---------------------------------------------------------------------------- portfolio
@dataclass
class Portfolio:
    """The portfolio of one fitted table: the learners' rows in their own encoding, the
    learners once fitted, and the chosen blend. Built by :meth:`build` in ``fit``; chosen once
    the model's scores of the pool and of held-out positives exist, by one path for either
    kind of evidence (:meth:`choose_on`: positives held out of the passes, or the class prior's
    folds), then keyed to the model's pool probabilities (:meth:`blend_pool`).
    """

    entropy: int
    encoder: Any
    x_labeled: np.ndarray  # the learners' encoding of the labeled rows (context, then held out)
    x_pool: np.ndarray
    n_held: int  # held-out positives: the last rows of x_labeled (0: folds are the evidence)
    fallback: str = FALLBACK
    n_threads: int | None = None  # the learners' threads (the classifier's n_threads at fit)
    z: float = EVIDENCE_Z
    # the members it runs: MEMBERS when built (read at build time, so that a study may run others)
    members: tuple[str, ...] = MEMBERS
    # whether the class prior's folds are its evidence (built with folds, no positive held out)
    reads_folds: bool = False
    # whether the model reads the table in WIDE_FROM_GROUPS feature groups or more: there the
    # boosted bags fill the fallback's tree place (_fallback_trees), and where evidence is
    # read they are judged in BOOSTED_BAGS_CHOSEN bags (learners.bag_count)
    wide: bool = False
    learners: dict[str, CrossFittedLearner] = field(default_factory=dict)
    labeled_scores: dict[str, np.ndarray] = field(default_factory=dict)
    pool_scores: dict[str, np.ndarray] = field(default_factory=dict)
    choice: Choice | None = None
    blend: Blend | None = None
    # what the choice read, the held-out evidence, and what the blend was keyed on: every
    # member's scores of the pool rows it was standardized on (every pool row where the model
    # scored them all; else the judged rows, the model's among them)
    evidence: Evidence | None = None
    member_pool_scores: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, X: Any, labeled: np.ndarray, held: np.ndarray | None, entropy: int,
              keep_columns: Sequence[str | int] | None = None,
              n_threads: int | None = None, folds: bool = False,
              feature_groups: int = 1) -> Portfolio:
        """The learners' encoding of the table ``X`` (``labeled``: its labeled rows; ``held``:
        the labeled rows held out of the passes, which go last, as in the passes' pool;
        ``keep_columns``: the identifiers the classifier keeps as features; ``folds``: the
        class prior's folds will be its evidence, so the boosted bags join as where positives
        are held out; ``feature_groups``: the groups the model reads the columns in, from
        WIDE_FROM_GROUPS of which the boosted bags join with or without evidence)."""
        encoder, table = encoded_table(X, labeled, keep_columns)
        x_labeled = table[labeled]
        if held is not None:
            x_labeled = HeldRows(held).last(x_labeled)
        n_held = 0 if held is None else int(held.sum())
        wide = feature_groups >= WIDE_FROM_GROUPS
        return cls(entropy, encoder, x_labeled, table[~labeled], n_held,
                   fallback=FALLBACK_WITH_HELD_OUT if n_held else FALLBACK, n_threads=n_threads,
                   members=MEMBERS_WITH_EVIDENCE if n_held or folds or wide else MEMBERS,
                   reads_folds=folds and not n_held, wide=wide)

    def fit_learners(self) -> None:
        """Fit every learner of the members on the learners' rows, unless they are fitted:
        each choice calls it; :class:`~puicl_model.estimator.fitted_table.FittedTable` may
        call it first, on a thread beside the model's passes."""
        if self.learners:
            return
        for kind in self.members:
            if kind == MODEL:
                continue
            learner = CrossFittedLearner(kind, self.entropy, n_threads=self.n_threads)
            self.labeled_scores[kind], self.pool_scores[kind] = learner.fit(
                self.x_labeled, self.x_pool, bags=self.bags(kind))
            self.learners[kind] = learner

    def bags(self, kind: str) -> int | None:
        """The bags the learner ``kind`` is fitted in on this table (None: not a bag learner;
        :func:`~puicl_model.estimator.learners.bag_count`)."""
        if kind not in BAG_KINDS:
            return None
        return bag_count(kind, len(self.x_pool), held_out=self.n_held > 0,
                         wide_evidence=self.wide and self.reads_evidence)

    def _held_scores(self, model_held: np.ndarray | None,
                     rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Each member's log-odds of the labeled rows ``rows`` (None: those held out of the
        passes, laid out last); the model's where it scored them, ``model_held``."""
        learners = {kind: (HeldRows.split(scores, self.n_held)[1] if rows is None
                           else scores[rows])
                    for kind, scores in self.labeled_scores.items()}
        return learners if model_held is None else {MODEL: log_odds(model_held), **learners}

    def choose_on(self, folds: Sequence[tuple[np.ndarray, np.ndarray]],
                  held_rows: Sequence[np.ndarray], judged: np.ndarray | None) -> Choice:
        """Choose the blend on evidence of either kind: per fold, the model's P(y = 1) of its
        held-out positives and of the pool rows ``judged`` (None: every pool row), and
        ``held_rows[k]``, where those positives are among the labeled rows as the learners
        scored them (a mask of the class prior's fold, or the positions of positives held out
        of the passes, :class:`~puicl_model.estimator.evidence_rows.HeldRows`)."""
        self.fit_learners()
        learners = (self.pool_scores if judged is None else
                    {kind: scores[judged] for kind, scores in self.pool_scores.items()})
        held = [self._held_scores(model_held, rows)
                for (model_held, _), rows in zip(folds, held_rows, strict=True)]
        pool = [{MODEL: log_odds(model_pool), **learners} for _, model_pool in folds]
        self.evidence = Evidence(held, pool)
        if self.n_held:
            self.fallback = fallback_on_evidence(self.evidence, self.members)
        self.choice = choose(self.evidence, self.members, fallback=self.fallback, z=self.z)
        if self.choice.name == FALLBACK:
            self.choice = self._fallback_trees(self.choice)
        return self.choice

    def _fallback_trees(self, choice: Choice) -> Choice:
        """``choice``, the fallback standing, with the stronger bag learner in its tree place:
        the boosted bags on a wide table (:data:`~.portfolio_rule.WIDE_FROM_GROUPS`), else
        :func:`~.portfolio_rule.stronger_trees`'s pick (the forests, or the boosted bags where
        their own out-of-fold evidence clearly leads)."""
        if self.wide and BAGGED_BOOSTED in self.labeled_scores:
            trees, why = BAGGED_BOOSTED, (
                f"the model reads this table in {WIDE_FROM_GROUPS} feature groups or more, where "
                "the forests' few columns per split miss a signal among many uninformative "
                "columns")
        else:
            trees, lead_se = stronger_trees(self.labeled_scores, self.pool_scores)
            why = (f"their out-of-fold AUC of every labeled positive against the pool leads by "
                   f"{lead_se:.1f} standard errors")
        if trees == BAGGED:
            return choice
        return replace(choice, weights=fallback_weights(trees),
                       reason=f"{choice.reason}; {trees} stand in {BAGGED}'s place: {why}")

    def settle(self) -> None:
        """Once the evidence is read as far as it needs: a choice that weighs the model beside
        the boosted bags gives way to the boosted bags alone where the model trails them and
        they clearly lead the forests (:func:`~.portfolio_rule.trees_over_weak_model`), then
        the chosen bags grow (:meth:`strengthen_chosen_bags`)."""
        assert self.choice is not None and self.evidence is not None
        trees_lead_se = stronger_trees(self.labeled_scores, self.pool_scores)[1]
        self.choice = trees_over_weak_model(self.choice, self.evidence, trees_lead_se)[0]
        self.strengthen_chosen_bags()

    def strengthen_chosen_bags(self) -> None:
        """Once the choice is final (the evidence read as far as it needs), where it weighs
        the boosted bags, refit them with BOOSTED_BAGS_CHOSEN bags (their first bags are those
        the evidence judged): the blend, the held-out positives' probabilities, π̂ and new
        rows read the stronger member; ``evidence`` keeps what the choice read."""
        assert self.choice is not None
        fitted = self.learners.get(BAGGED_BOOSTED)
        if (BAGGED_BOOSTED not in self.choice.weights
                or (fitted is not None and len(fitted.models_) >= BOOSTED_BAGS_CHOSEN)):
            return
        learner = CrossFittedLearner(BAGGED_BOOSTED, self.entropy, n_threads=self.n_threads)
        self.labeled_scores[BAGGED_BOOSTED], self.pool_scores[BAGGED_BOOSTED] = learner.fit(
            self.x_labeled, self.x_pool, bags=BOOSTED_BAGS_CHOSEN)
        self.learners[BAGGED_BOOSTED] = learner

    def choose_fallback(self) -> Choice:
        """The fallback blend, with no evidence read: what a table below
        MIN_LABELED_FOR_HOLD_OUT labeled positives takes (module docstring), the boosted bags
        in its tree place on a wide table (:meth:`_fallback_trees`; weighed 0.2 there, they
        keep the bags they were fitted in)."""
        self.fit_learners()
        self.evidence = None
        self.choice = self._fallback_trees(Choice(
            self.fallback, dict(blends_for(self.members, self.fallback)[self.fallback]), {}, {},
            0, NO_EVIDENCE))
        return self.choice

    def blend_pool(self, model_pool: np.ndarray | None, judged: np.ndarray | None = None,
                   model_judged: np.ndarray | None = None) -> np.ndarray:
        """Key the chosen blend to the model's probabilities of the pool, ``model_pool``, where
        the model scored every row (else of the judged rows, ``model_judged``: the model's
        distribution over a seeded sample of the pool, for a blend that does not weigh it),
        and return its P(y = 1) of every pool row. ``member_pool_scores``: what it read."""
        assert self.choice is not None
        weights = self.choice.weights
        if model_pool is not None:
            pool = {MODEL: log_odds(model_pool), **self.pool_scores}
            self.blend = Blend.on_pool(weights, pool, model_pool)
            self.member_pool_scores = pool
        else:
            assert MODEL not in weights and judged is not None and model_judged is not None
            judged_pool = {kind: scores[judged] for kind, scores in self.pool_scores.items()}
            self.blend = Blend.on_pool(weights, judged_pool, model_judged)
            self.member_pool_scores = {MODEL: log_odds(model_judged), **judged_pool}
            pool = dict(self.pool_scores)
        return self.blend.proba(pool, model_pool)

    def held_proba(self, model_held: np.ndarray | None) -> np.ndarray:
        """The chosen blend's P(y = 1) of every positive held out of the passes (the model's
        of them, ``model_held``, where the blend weighs it)."""
        assert self.blend is not None
        assert model_held is not None or not self.weighs_model
        return self.blend.proba(self._held_scores(model_held), model_held)

    def evidence_proba(self, model_held: np.ndarray, model_judged: np.ndarray,
                       judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chosen blend's P(y = 1) of every held-out positive and of the judged pool rows,
        as the evidence's passes scored them (``model_held``, ``model_judged``: the model's,
        with the held-out positives set apart from the context), the blend standardized and
        keyed on those pool rows: the one fold of a table with held-out positives that π̂
        reads (each sample scored as the other is)."""
        assert self.choice is not None
        held = self._held_scores(model_held)
        pool = {MODEL: log_odds(model_judged),
                **{kind: scores[judged] for kind, scores in self.pool_scores.items()}}
        blend = Blend.on_pool(self.choice.weights, pool, model_judged)
        return blend.proba(held, model_held), blend.proba(pool, model_judged)

    def fold_proba(self, fold: tuple[np.ndarray, np.ndarray], mask: np.ndarray,
                   pool_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A fold's (held-out positives', pool's) P(y = 1) under the chosen blend, standardized
        and keyed to the model's probabilities on the fold's own pool scores (what π̂ reads);
        ``pool_rows``: the pool rows the fold scored (None: every one)."""
        assert self.choice is not None and self.blend is not None
        if self.blend.model_alone:
            return fold
        held = self._held_scores(fold[0], mask)
        pool = {MODEL: log_odds(fold[1]),
                **{kind: scores if pool_rows is None else scores[pool_rows]
                   for kind, scores in self.pool_scores.items()}}
        blend = Blend.on_pool(self.choice.weights, pool, fold[1])
        return blend.proba(held), blend.proba(pool)

    @property
    def members_read_folds(self) -> bool:
        """Whether the class prior's folds are its evidence (:meth:`build`'s ``folds``, with no
        positive held out)."""
        return self.reads_folds

    @property
    def reads_evidence(self) -> bool:
        """Whether its choice reads evidence: positives held out, or the class prior's folds."""
        return self.n_held > 0 or self.reads_folds

    @property
    def weighs_model(self) -> bool:
        """Whether the chosen blend weighs the model (before the choice: it will be scored)."""
        return self.choice is None or MODEL in self.choice.weights

    def new_row_proba(self, X: Any, model_proba: np.ndarray | None) -> np.ndarray:
        """P(y = 1) of new rows ``X`` (a table as given to ``fit``), from the model's
        ``model_proba`` (None where the blend does not weigh the model)."""
        assert self.blend is not None
        if self.blend.model_alone:
            assert model_proba is not None
            return np.asarray(model_proba, dtype=np.float64)
        x = self.encoder.transform(X).astype(np.float64)
        scores = {kind: self.learners[kind].decision(x) for kind in self.blend.weights
                  if kind != MODEL}
        if model_proba is not None:
            scores[MODEL] = log_odds(model_proba)
        return self.blend.proba(scores)
