"""The wide tables' trees (puicl_model.estimator.portfolio_rule.WIDE_FROM_GROUPS): on a table the
model reads in that many feature groups or more, the boosted bags fill the fallback's tree place,
with or without evidence, whatever their own lead over the forests, and where evidence is read
they are judged in the bags they would be chosen in."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from puicl_model import PUICLClassifier
from puicl_model.estimator.learners import (
    BAG_KINDS,
    BAGGED,
    BAGGED_BOOSTED,
    BAGS,
    BOOSTED_BAGS_CHOSEN,
    bag_count,
)
from puicl_model.estimator.portfolio import (
    FALLBACK,
    FALLBACK_WEIGHTS,
    MEMBERS,
    MEMBERS_WITH_EVIDENCE,
    Blend,
    Portfolio,
)
from puicl_model.estimator.portfolio_rule import WIDE_FROM_GROUPS, fallback_weights


def _wide_table(n_labeled: int, n_pool: int, columns: int = 70,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps in 3 of ``columns`` columns, the rest noise; half the pool negative.
    (X, s, and which rows are positive)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_labeled + n_pool, columns))
    positive = np.r_[np.ones(n_labeled, bool), rng.random(n_pool) < 0.5]
    x[~positive, :3] += 1.5 * (x[~positive, :3] > 0)
    s = np.r_[np.ones(n_labeled), np.zeros(n_pool)]
    return x, s, positive


def test_a_small_wide_table_takes_the_boosted_bags_in_the_fallback_unread(small_weights,
                                                                           tmp_path) -> None:
    """Below the hold-out threshold on a small pool, a table of four feature groups takes the
    model-weighted fallback with no evidence read and the boosted bags in its tree place,
    fitted in the bags every learner gets there; a saved classifier scores new rows as the
    fitted one does."""
    x, s, positive = _wide_table(150, 500)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=1).fit(x, s)
    assert clf.fitted_.planners[0].n_feature_groups == WIDE_FROM_GROUPS
    choice, portfolio = clf.choice_, clf.portfolio_
    assert choice.name == FALLBACK and not choice.read_evidence, choice.describe()
    assert dict(choice.weights) == fallback_weights(BAGGED_BOOSTED)
    assert "feature groups" in choice.reason and clf.blend_weight_ == 0.6
    assert portfolio.wide and portfolio.members == MEMBERS_WITH_EVIDENCE
    assert not portfolio.members_read_folds  # the boosted bags joined; no fold is read
    assert len(portfolio.learners[BAGGED_BOOSTED].models_) == BAGS
    assert portfolio.evidence is None and not clf.fitted_.model_folds
    # the forests' few columns per split miss the steps among the noise; the boosted bags do not
    truth = positive[s == 0]
    proba = clf.predict_proba(x[s == 0])[:, 1]
    scores = portfolio.member_pool_scores
    with_forests = Blend.on_pool(FALLBACK_WEIGHTS, scores, proba).score(scores)
    assert roc_auc_score(truth, scores[BAGGED_BOOSTED]) > roc_auc_score(truth, scores[BAGGED])
    assert roc_auc_score(truth, proba) > roc_auc_score(truth, with_forests)
    clf.save(tmp_path / "wide")
    loaded = PUICLClassifier.load(tmp_path / "wide")
    new_rows = _wide_table(0, 40, seed=7)[0]
    assert np.array_equal(loaded.predict_proba(new_rows), clf.predict_proba(new_rows))


def test_a_narrower_table_keeps_the_forests_in_its_fallback(small_weights) -> None:
    x, s, _ = _wide_table(150, 500, columns=3 * 20)  # three feature groups
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=1).fit(x, s)
    assert clf.fitted_.planners[0].n_feature_groups == WIDE_FROM_GROUPS - 1
    assert not clf.portfolio_.wide and clf.portfolio_.members == MEMBERS
    assert dict(clf.choice_.weights) == dict(FALLBACK_WEIGHTS)


def _held_out_portfolio(groups: int) -> Portfolio:
    """The portfolio of a table of 700 labeled positives (the last 140 held out of the passes)
    and 900 pool rows, read in ``groups`` feature groups, its learners fitted."""
    x, s, _ = _wide_table(700, 900)
    labeled = s == 1
    held = np.zeros(int(labeled.sum()), bool)
    held[-140:] = True
    portfolio = Portfolio.build(x, labeled, held, 0, n_threads=1, feature_groups=groups)
    portfolio.fit_learners()
    return portfolio


def test_a_standing_fallback_on_a_wide_table_takes_the_boosted_bags_whatever_their_lead(
        rng) -> None:
    """Where the evidence leaves the fallback standing, a narrow table keeps the forests unless
    the boosted bags' own evidence clearly leads; a wide one takes the boosted bags even where
    it does not."""
    # the model ranks the held-out positives far above the pool: the model-weighted fallback
    # stands, and no candidate clears the bar over it
    evidence = [(rng.uniform(0.9, 1.0, 140), rng.uniform(0.0, 1.0, 900))]
    chosen = {}
    for groups in (WIDE_FROM_GROUPS - 1, WIDE_FROM_GROUPS):
        portfolio = _held_out_portfolio(groups)
        # boosted bags no better than the forests by their own evidence
        portfolio.labeled_scores[BAGGED_BOOSTED] = portfolio.labeled_scores[BAGGED]
        portfolio.pool_scores[BAGGED_BOOSTED] = portfolio.pool_scores[BAGGED]
        portfolio.z = float("inf")
        chosen[groups] = portfolio.choose_on(evidence, [np.arange(560, 700)], None)
        assert portfolio.fallback == FALLBACK and not portfolio.members_read_folds
    assert dict(chosen[WIDE_FROM_GROUPS - 1].weights) == dict(FALLBACK_WEIGHTS)
    assert dict(chosen[WIDE_FROM_GROUPS].weights) == fallback_weights(BAGGED_BOOSTED)


def test_a_wide_table_that_reads_evidence_judges_the_boosted_bags_in_their_chosen_count(
        rng) -> None:
    """On a wide table with held-out positives the boosted bags are fitted, and judged, in
    BOOSTED_BAGS_CHOSEN bags (the forests keep theirs); once chosen they are not refitted. A
    narrower table judges them in BAGS; a small wide one, reading no evidence, keeps BAGS too
    (the first test)."""
    # the boosted bags' scores rank the held-out positives far above the pool: they are chosen
    evidence = [(rng.uniform(0.0, 1.0, 140), rng.uniform(0.0, 1.0, 900))]
    fitted = {}
    for groups in (WIDE_FROM_GROUPS - 1, WIDE_FROM_GROUPS):
        portfolio = _held_out_portfolio(groups)
        assert portfolio.reads_evidence
        fitted[groups] = {kind: len(learner.models_)
                          for kind, learner in portfolio.learners.items() if kind in BAG_KINDS}
        if groups == WIDE_FROM_GROUPS:
            judged = portfolio.learners[BAGGED_BOOSTED]
            portfolio.labeled_scores[BAGGED_BOOSTED][-140:] += 100.0
            choice = portfolio.choose_on(evidence, [np.arange(560, 700)], None)
            assert BAGGED_BOOSTED in choice.weights, choice.describe()
            portfolio.settle()
            assert portfolio.learners[BAGGED_BOOSTED] is judged  # not refitted
    assert fitted[WIDE_FROM_GROUPS - 1] == {BAGGED: BAGS, BAGGED_BOOSTED: BAGS}
    assert fitted[WIDE_FROM_GROUPS] == {BAGGED: BAGS, BAGGED_BOOSTED: BOOSTED_BAGS_CHOSEN}
    assert bag_count(BAGGED_BOOSTED, 900, held_out=True, wide_evidence=True) == BOOSTED_BAGS_CHOSEN
    assert bag_count(BAGGED, 900, held_out=True, wide_evidence=True) == BAGS
