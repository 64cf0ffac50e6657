"""The per-table portfolio (puicl_model.estimator.portfolio): the evidence it reads, the rule that
chooses, the probabilities it keeps, and how the classifier runs it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from puicl_model import PUICLClassifier
from puicl_model.estimator import learners
from puicl_model.estimator.learners import row_decision
from puicl_model.estimator.portfolio import (
    BAGGED,
    BOOSTED,
    CANDIDATES,
    FALLBACK,
    FALLBACK_WEIGHTS,
    LOGISTIC,
    MAX_HELD_OUT,
    MEMBERS,
    MIN_LABELED_FOR_HOLD_OUT,
    MIN_POOL_FOR_PORTFOLIO,
    MODEL,
    Blend,
    CrossFittedLearner,
    Evidence,
    blends_for,
    choose,
    held_out_aucs,
    held_out_rows,
)


def _evidence(rng: np.random.Generator, signal: dict[str, float], n_held: int = 300,
              n_pool: int = 900, folds: int = 1) -> Evidence:
    """Held-out positives and a half-negative pool scored by the members of ``signal``, each
    separating positives from negatives by ``signal[member]`` (log-odds)."""
    held, pool = [], []
    negative = np.arange(n_pool) < n_pool // 2
    for _ in range(folds):
        held.append({m: rng.normal(size=n_held) + v for m, v in signal.items()})
        pool.append({m: rng.normal(size=n_pool) + v * ~negative for m, v in signal.items()})
    return Evidence(held, pool)


def test_held_out_auc_is_the_mann_whitney_auc_and_its_error_shrinks_with_rows(rng) -> None:
    evidence = _evidence(rng, {MODEL: 1.0, LOGISTIC: 0.5, BAGGED: 0.0})
    aucs, se = held_out_aucs(evidence, MEMBERS, fallback="model")
    held, pool = evidence.held[0], evidence.pool[0]
    for member in MEMBERS:
        expected = roc_auc_score(np.r_[np.ones(300), np.zeros(900)],
                                 np.r_[held[member], pool[member]])
        assert aucs[member] == pytest.approx(expected, abs=1e-12)
    assert se["model"] == 0.0  # the fallback against itself
    assert se["logistic"] > 0.0
    larger = held_out_aucs(_evidence(rng, {MODEL: 1.0, LOGISTIC: 0.5, BAGGED: 0.0},
                                     n_held=3000, n_pool=9000), MEMBERS, fallback="model")[1]
    assert larger["logistic"] < se["logistic"] / 2


def test_the_rule_follows_strong_evidence_and_falls_back_on_thin(rng) -> None:
    strong = _evidence(rng, {MODEL: 0.0, LOGISTIC: 0.2, BAGGED: 2.0})
    for fallback in ("model", "model+logistic", "logistic"):
        assert choose(strong, MEMBERS, fallback=fallback).name in ("bagged", "logistic+bagged")
    # a tie in truth: whatever leads by noise does not replace the fallback at a high bar
    tie = _evidence(rng, {MODEL: 1.0, LOGISTIC: 1.0, BAGGED: 1.0}, n_held=60, n_pool=200)
    assert choose(tie, MEMBERS, fallback="model", z=10.0).name == "model"
    assert choose(tie, MEMBERS, fallback="model+logistic+bagged",
                  z=10.0).name == "model+logistic+bagged"
    # with no bar the best held-out AUC wins
    aucs, _ = held_out_aucs(tie, MEMBERS, fallback="model")
    assert choose(tie, MEMBERS, fallback="model", z=0.0).name == max(aucs, key=aucs.get)


def test_a_clear_lead_stands_where_the_highest_auc_is_not_clear() -> None:
    """The candidate of highest held-out AUC may lead the fallback by less than the bar while
    another, read more surely, clears it: the clear one is chosen, not the fallback; and of
    several clear ones the highest AUC. ``undecided`` reads more while the highest is not the
    choice and leads by more than READ_MORE_Z standard errors, and no more once it is chosen."""
    from puicl_model.estimator.portfolio_rule import Choice, clearly_leading, undecided

    aucs = {"model": 0.60, "bagged": 0.66, "model+bagged": 0.64, "logistic": 0.63}
    se = {"model": 0.0, "bagged": 0.03, "model+bagged": 0.01, "logistic": 0.005}
    assert clearly_leading(aucs, se, "model", 3.0) == ["model+bagged", "logistic"]
    assert clearly_leading(aucs, se, "model", 10.0) == []
    chosen = Choice("model+bagged", {MODEL: 0.5, BAGGED: 0.5}, aucs, se, 300, "")
    assert undecided(chosen, "model", 3.0)  # bagged, the highest, leads by 2 SE: read more
    stood = Choice("model", {MODEL: 1.0}, aucs, se, 300, "")
    assert undecided(stood, "model", 3.0)
    # the highest within READ_MORE_Z standard errors of the fallback: more rows would not settle
    # it, so the clear blend stands
    far = Choice("model+bagged", {MODEL: 0.5, BAGGED: 0.5}, aucs, {**se, "bagged": 0.07}, 300, "")
    assert not undecided(far, "model", 3.0)
    # the highest chosen: nothing is left to settle
    settled = Choice("bagged", {BAGGED: 1.0}, aucs, {**se, "bagged": 0.01}, 300, "")
    assert not undecided(settled, "model", 3.0)


def test_the_rule_chooses_the_highest_of_the_clear_leads(rng) -> None:
    """On evidence where a lone member leads by more in AUC but less surely than a blend
    holding the fallback's own member, the blend replaces the fallback."""
    n_held, n_pool = 200, 400
    negative = np.arange(n_pool) < n_pool // 2
    base_held, base_pool = rng.normal(size=n_held) + 0.3, rng.normal(size=n_pool) + 0.3 * ~negative
    # bagged: the model's scores plus wide noise and a stronger signal; logistic: the model's
    # scores plus a small, surely read gain
    held = {MODEL: base_held, LOGISTIC: base_held + 0.15 + 0.05 * rng.normal(size=n_held),
            BAGGED: base_held + 0.6 + 2.0 * rng.normal(size=n_held)}
    pool = {MODEL: base_pool, LOGISTIC: base_pool + 0.15 * ~negative
            + 0.05 * rng.normal(size=n_pool),
            BAGGED: base_pool + 0.6 * ~negative + 2.0 * rng.normal(size=n_pool)}
    evidence = Evidence([held], [pool])
    aucs, se = held_out_aucs(evidence, MEMBERS, fallback="model")
    clear = [name for name in aucs if name != "model"
             and aucs[name] - aucs["model"] > 3.0 * se[name]]
    best = max(aucs, key=aucs.get)
    assert clear and best not in clear  # the case this test is for
    picked = choose(evidence, MEMBERS, fallback="model")
    assert picked.name == max(clear, key=aucs.get)


def test_the_small_tables_fallback_weighs_the_model_more_than_both_learners(rng) -> None:
    """A tie stands on the model-weighted blend, which is a candidate of its own, judged with
    the even ones; a table whose evidence clearly favours the trees still leaves it."""
    assert FALLBACK in CANDIDATES and dict(CANDIDATES[FALLBACK]) == dict(FALLBACK_WEIGHTS)
    assert FALLBACK_WEIGHTS[MODEL] > sum(w for m, w in FALLBACK_WEIGHTS.items() if m != MODEL)
    assert sum(FALLBACK_WEIGHTS.values()) == pytest.approx(1.0)
    tie = _evidence(rng, {MODEL: 1.0, LOGISTIC: 1.0, BAGGED: 1.0}, n_held=60, n_pool=200)
    picked = choose(tie, MEMBERS)
    assert picked.name == FALLBACK and dict(picked.weights) == dict(FALLBACK_WEIGHTS)
    assert FALLBACK in picked.held_out_auc and picked.lead_se[FALLBACK] == 0.0
    strong = _evidence(rng, {MODEL: 0.0, LOGISTIC: 0.2, BAGGED: 2.0})
    assert choose(strong, MEMBERS).name in ("bagged", "logistic+bagged")
    # a study's portfolio without PU bagging has no such blend to stand on
    with pytest.raises(ValueError, match="not a blend of model, logistic, boosted"):
        blends_for((MODEL, LOGISTIC, BOOSTED), FALLBACK)
    # the earlier fallback (stored in classifiers saved before) is still a blend
    assert "model+logistic+bagged" in blends_for(MEMBERS, "model+logistic+bagged")


def test_folds_are_averaged(rng) -> None:
    evidence = _evidence(rng, {MODEL: 1.0, LOGISTIC: 0.0, BAGGED: 0.0}, folds=2)
    aucs, _ = held_out_aucs(evidence, MEMBERS)
    single = [held_out_aucs(Evidence([h], [p]), MEMBERS)[0]["model"]
              for h, p in zip(evidence.held, evidence.pool, strict=True)]
    assert aucs["model"] == pytest.approx(np.mean(single), abs=1e-12)


def test_blended_probabilities_keep_the_models_distribution_over_the_pool(rng) -> None:
    model_pool = 1.0 / (1.0 + np.exp(-rng.normal(size=500)))
    pool = {MODEL: np.log(model_pool / (1 - model_pool)), LOGISTIC: rng.normal(size=500),
            BAGGED: rng.normal(size=500)}
    blend = Blend.on_pool(CANDIDATES["model+logistic+bagged"], pool, model_pool)
    proba = blend.proba(pool)
    assert np.allclose(np.sort(proba), np.sort(model_pool))  # the same distribution
    order = np.argsort(blend.score(pool), kind="stable")
    assert np.all(np.diff(proba[order]) >= -1e-12)  # in the blend's order
    alone = Blend.on_pool(CANDIDATES["model"], pool, model_pool)
    assert np.array_equal(alone.proba(pool, model_pool), model_pool)  # bit for bit


def test_learners_are_cross_fitted_and_keyed_by_the_seed(rng) -> None:
    x_labeled, x_pool = rng.normal(size=(60, 3)) + 1.0, rng.normal(size=(200, 3))
    for kind in (LOGISTIC, BOOSTED):  # BAGGED: the test below
        first = CrossFittedLearner(kind, 7).fit(x_labeled, x_pool)
        again = CrossFittedLearner(kind, 7).fit(x_labeled, x_pool)
        assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
        assert roc_auc_score(np.r_[np.ones(60), np.zeros(200)], np.r_[first]) > 0.7


def test_every_fit_runs_on_one_openmp_thread_side_by_side(rng, monkeypatch) -> None:
    """The learners' fits never take a team of OpenMP threads (the cliff on a busy machine:
    puicl_model.estimator.learners), run on a pool of threads, and give the same bytes on
    one thread or three."""
    import threading

    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_info

    from puicl_model.estimator.learners import BAGGED

    seen: list[tuple[int, str]] = []
    fit = HistGradientBoostingClassifier.fit

    def recording_fit(self, x, y, *args, **kwargs):
        openmp = [pool["num_threads"] for pool in threadpool_info()
                  if pool["user_api"] == "openmp"]
        seen.append((max(openmp, default=1), threading.current_thread().name))
        return fit(self, x, y, *args, **kwargs)

    monkeypatch.setattr(HistGradientBoostingClassifier, "fit", recording_fit)
    x_labeled, x_pool = rng.normal(size=(40, 3)) + 1.0, rng.normal(size=(120, 3))
    x_new = rng.normal(size=(30, 3))
    # fits this small run one after another, on the calling thread
    CrossFittedLearner(BOOSTED, 5, n_threads=3).fit(x_labeled, x_pool)
    assert {name for _, name in seen} == {threading.current_thread().name}
    seen.clear()
    monkeypatch.setattr(learners, "THREADS_FROM_CELLS", 0)  # every fit side by side
    monkeypatch.setattr(learners, "BAG_THREADS_FROM_CELLS", 0)
    for kind in (BOOSTED, BAGGED, LOGISTIC):
        results = []
        for workers in (1, 3):
            learner = CrossFittedLearner(kind, 5, n_threads=workers)
            results.append([*learner.fit(x_labeled, x_pool), learner.decision(x_new)])
        for one, three in zip(*results, strict=True):
            assert one.tobytes() == three.tobytes(), kind
    assert seen and all(threads == 1 for threads, _ in seen)
    assert len({name for _, name in seen}) > 1  # the fits ran on a pool of threads


def test_pu_bagging_scores_every_row_out_of_bag_and_is_keyed_by_the_seed(rng) -> None:
    """The bagged learner: a pool row is scored by the bags that did not draw it, a labeled
    positive by the bags of its fold (which left it out), each draw keyed by the seed."""
    from puicl_model.estimator.learners import BAGGED, BAGS
    from puicl_model.passes import seed_keys

    x_labeled, x_pool = rng.normal(size=(60, 3)) + 1.0, rng.normal(size=(200, 3))
    learner = CrossFittedLearner(BAGGED, 7, n_threads=1)
    learner.fit(x_labeled, x_pool)
    assert len(learner.models_) == BAGS
    # two bags a fold, so that some pool rows are out of some bags and not of others
    count = 2 * BAGS
    labeled, pool = learner.fit(x_labeled, x_pool, bags=count)
    again = CrossFittedLearner(BAGGED, 7, n_threads=1).fit(x_labeled, x_pool, bags=count)
    assert labeled.tobytes() == again[0].tobytes() and pool.tobytes() == again[1].tobytes()
    assert not np.array_equal(pool, CrossFittedLearner(BAGGED, 8).fit(x_labeled, x_pool,
                                                                      bags=count)[1])
    # the classifier's n_threads reaches the trees: their scores keep their bits on two threads
    two = CrossFittedLearner(BAGGED, 7, n_threads=2).fit(x_labeled, x_pool, bags=count)
    assert labeled.tobytes() == two[0].tobytes() and pool.tobytes() == two[1].tobytes()

    def seed(*key: int) -> int:
        sequence = np.random.SeedSequence(7, spawn_key=(seed_keys.BAGS, *key))
        return int(sequence.generate_state(1)[0] % 2**31)

    fold = np.random.default_rng(seed()).permutation(60) % learner.folds
    drawn = [np.random.default_rng(seed(bag)).integers(0, 200, int((fold != bag % 5).sum()))
             for bag in range(count)]
    decisions = [row_decision(model, x) for model in learner.models_
                 for x in (np.vstack([x_labeled, x_pool]),)]
    for row in (0, 17, 59):
        bags = [bag for bag in range(count) if bag % 5 == fold[row]]
        assert labeled[row] == pytest.approx(np.mean([decisions[b][row] for b in bags]))
    for row in (0, 101, 199):
        bags = [bag for bag in range(count) if row not in drawn[bag]]
        assert 0 < len(bags) < count
        assert pool[row] == pytest.approx(np.mean([decisions[b][60 + row] for b in bags]))
    assert roc_auc_score(np.r_[np.ones(60), np.zeros(200)], np.r_[labeled, pool]) > 0.7
    # a pool row that every bag drew (here the only one) is scored as a new row is
    single = CrossFittedLearner(BAGGED, 7, n_threads=1)
    assert single.fit(x_labeled, x_pool[:1])[1].tobytes() == single.decision(x_pool[:1]).tobytes()
    # a new row's score has the same bits alone as in a block (the bags summed one by one)
    block = learner.decision(x_pool)
    assert all(learner.decision(x_pool[i:i + 1]).tobytes() == block[i:i + 1].tobytes()
               for i in range(0, 200, 13))


def test_the_bags_grow_on_large_pools_without_evidence(rng, monkeypatch) -> None:
    """From BAGS_MANY_FROM_POOL pool rows, where no positives are held out, the portfolio's
    bag learners fit BAGS_MANY bags, whose first BAGS are the smaller count's bit for bit; with
    held-out positives and on smaller pools: BAGS."""
    import pandas as pd

    from puicl_model.estimator.learners import (
        BAGGED_BOOSTED,
        BAGS,
        BAGS_MANY,
        BAGS_MANY_FROM_POOL,
        bag_count,
    )
    from puicl_model.estimator.portfolio import Portfolio

    assert BAGS < BAGS_MANY and BAGS_MANY % learners.LEARNER_FOLDS == 0
    assert bag_count(BAGGED, BAGS_MANY_FROM_POOL - 1, held_out=False) == BAGS
    assert bag_count(BAGGED, BAGS_MANY_FROM_POOL, held_out=False) == BAGS_MANY
    assert bag_count(BAGGED, BAGS_MANY_FROM_POOL, held_out=True) == BAGS
    assert bag_count(BAGGED_BOOSTED, BAGS_MANY_FROM_POOL, held_out=False) == BAGS_MANY
    assert bag_count(BAGGED_BOOSTED, 10 * BAGS_MANY_FROM_POOL, held_out=True) == BAGS
    assert bag_count(BAGGED_BOOSTED, BAGS_MANY_FROM_POOL - 1, held_out=False) == BAGS
    # a small pool stands for a large one: the count follows the pool's rows
    monkeypatch.setattr(learners, "BAGS_MANY_FROM_POOL", 120)
    X = pd.DataFrame(rng.normal(size=(160, 3)), columns=["a", "b", "c"])
    labeled = np.arange(160) < 40
    X.loc[labeled] += 1.0

    def bags(held: np.ndarray | None, pool: slice = slice(None),
             folds: bool = False) -> Portfolio:
        """The portfolio's learners on the labeled rows and ``pool``'s pool rows (``held``: the
        rows held out of the passes, a mask over the table; ``folds``: the class prior's folds
        are the evidence)."""
        keep = np.r_[np.flatnonzero(labeled), np.flatnonzero(~labeled)[pool]]
        portfolio = Portfolio.build(X.iloc[keep].reset_index(drop=True), labeled[keep],
                                    None if held is None else held[keep][labeled[keep]],
                                    entropy=5, n_threads=1, folds=folds)
        portfolio.fit_learners()
        return portfolio

    many = bags(None)
    assert len(many.learners[BAGGED].models_) == BAGS_MANY
    assert len(bags(None, slice(0, 119)).learners[BAGGED].models_) == BAGS
    held = labeled & (np.arange(160) % 5 == 0)
    assert len(bags(held).learners[BAGGED].models_) == BAGS
    # the boosted bags the folds judge grow alike; judged on held-out positives they stay few
    assert len(bags(None, folds=True).learners[BAGGED_BOOSTED].models_) == BAGS_MANY
    assert len(bags(None, slice(0, 119), folds=True).learners[BAGGED_BOOSTED].models_) == BAGS
    assert len(bags(held).learners[BAGGED_BOOSTED].models_) == BAGS
    few = CrossFittedLearner(BAGGED, 5, n_threads=1)
    _, pool_few = few.fit(many.x_labeled, many.x_pool)
    probe = rng.normal(size=(30, many.x_pool.shape[1]))
    for first, same in zip(many.learners[BAGGED].models_[:BAGS], few.models_, strict=True):
        assert row_decision(first, probe).tobytes() == row_decision(same, probe).tobytes()
    assert not np.array_equal(many.pool_scores[BAGGED], pool_few)  # the other bags score too


def test_held_out_rows_are_keyed_by_the_seed() -> None:
    first = held_out_rows(700, 350, entropy=5)
    assert first.sum() == 350
    assert np.array_equal(first, held_out_rows(700, 350, entropy=5))
    assert not np.array_equal(first, held_out_rows(700, 350, entropy=6))


def _table(rng: np.random.Generator, n_labeled: int, n_pool: int, d: int = 5):
    x_labeled = rng.normal(size=(n_labeled, d))
    x_pool = rng.normal(size=(n_pool, d))
    negatives = rng.random(n_pool) < 0.5
    x_pool[negatives, :2] += 1.0
    return np.vstack([x_labeled, x_pool]), np.r_[np.ones(n_labeled), np.zeros(n_pool)]


def test_a_tiny_pool_is_scored_by_the_model_alone_bit_for_bit(small_weights, rng) -> None:
    X, s = _table(rng, 80, MIN_POOL_FOR_PORTFOLIO - 1)
    auto = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    alone = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)
    assert auto.portfolio_ is None and auto.choice_ is None and auto.blend_weight_ == 1.0
    assert np.array_equal(auto.predict_proba(X[s == 0]), alone.predict_proba(X[s == 0]))


def test_smaller_tables_take_the_fallback_with_no_fold_pass(small_weights, rng) -> None:
    """Below the hold-out threshold the model-weighted fallback stands with no evidence read:
    the model scores the pool as it does alone, and the class prior's folds are scored only
    when π̂ is asked for."""
    X, s = _table(rng, 120, 300)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=2).fit(X, s)
    proba = clf.predict_proba(X[s == 0])[:, 1]
    choice = clf.choice_
    assert choice is not None and choice.name == FALLBACK == clf.portfolio_.fallback
    assert dict(choice.weights) == dict(FALLBACK_WEIGHTS) and clf.blend_weight_ == 0.6
    assert not choice.read_evidence and choice.held_out_auc == {} and choice.n_held_out == 0
    assert choice.describe().endswith("no evidence read")
    assert clf.portfolio_.evidence is None and not clf.fitted_.model_folds
    alone = PUICLClassifier(weights=small_weights, device="cpu", random_state=2,
                            portfolio="none").fit(X, s)
    assert clf.n_passes_ == alone.n_passes_  # no fold pass beside the pool's
    model = alone.predict_proba(X[s == 0])[:, 1]
    # the blend keeps the model's distribution of probabilities over the pool
    assert np.allclose(np.sort(proba), np.sort(model)) and not np.array_equal(proba, model)
    assert 0.0 <= clf.estimate_class_prior() <= 1.0  # now the folds are scored
    assert 2 in clf.fitted_.model_folds
    from puicl_model.estimator.learners import BAGS

    assert len(clf.portfolio_.learners[BAGGED].models_) == BAGS


@pytest.mark.slow
def test_large_tables_hold_positives_out_and_choose_reproducibly(small_weights, rng,
                                                                 monkeypatch) -> None:
    from puicl_model.estimator.portfolio_gate import HELD_OUT_FOLDS

    n_labeled = MIN_LABELED_FOR_HOLD_OUT + 40
    X, s = _table(rng, n_labeled, 2500)  # a pool larger than the judged sample
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    # a fifth of the labeled positives is the evidence; every one stays in the passes' context
    assert clf.n_held_out_ == min(n_labeled // HELD_OUT_FOLDS, MAX_HELD_OUT)
    assert len(clf.x_labeled_) == n_labeled and clf.fitted_.n_labeled == n_labeled
    pool = clf.predict_proba(X[s == 0])
    assert pool.shape == (2500, 2) and np.all((pool >= 0) & (pool <= 1))
    # the blend is chosen against a judged sample of the pool (more where the choice is close)
    from puicl_model.estimator.learners import BAGS, BAGS_MANY_FROM_POOL
    from puicl_model.estimator.portfolio import JUDGED_POOL_ROWS

    assert JUDGED_POOL_ROWS <= len(clf.portfolio_.evidence.pool[0]["model"]) <= 2500
    # a pool of 2,500 rows with held-out positives: the forest keeps its few bags
    assert BAGS_MANY_FROM_POOL <= 2500
    assert len(clf.portfolio_.learners[BAGGED].models_) == BAGS
    passes = clf.n_passes_
    folds = clf.held_out_scores()
    assert len(folds) == 1 and len(folds[0][0]) == clf.n_held_out_
    assert len(folds[0][1]) == len(clf.portfolio_.evidence.pool[0]["model"])
    assert 0.0 <= clf.estimate_class_prior() <= 1.0 and clf.n_passes_ == passes
    again = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    assert np.array_equal(again.predict_proba(X[s == 0]), pool)
    assert again.choice_ == clf.choice_ or again.choice_.name == clf.choice_.name
    # new rows: read off the same blend, inside the pool's range of probabilities; where
    # the blend gives the model no weight, no pass of the model runs for them
    if not clf.portfolio_.weighs_model:
        import puicl_model.estimator.fitted_scorer as module

        monkeypatch.setattr(module, "score_new_rows", lambda *a, **k: pytest.fail("a pass ran"))
    new = clf.predict_proba(X[s == 0][:7] + 1e-3)[:, 1]
    assert np.all((new >= pool[:, 1].min()) & (new <= pool[:, 1].max()))


@pytest.mark.slow
def test_large_tables_score_the_pool_as_the_model_alone_does(small_weights, rng,
                                                            monkeypatch) -> None:
    """Where the chosen blend weighs the model, its scores of the pool are the model alone's,
    bit for bit: the held-out positives are set apart only from the evidence's passes."""
    import puicl_model.estimator.portfolio as portfolio_module
    from puicl_model.estimator.learners import log_odds

    monkeypatch.setattr(portfolio_module, "fallback_on_evidence", lambda *args: "model-weighted")
    original = portfolio_module.choose
    monkeypatch.setattr(portfolio_module, "choose",  # the fallback stands
                        lambda *args, **kwargs: original(*args, **{**kwargs, "z": np.inf}))
    X, s = _table(rng, MIN_LABELED_FOR_HOLD_OUT + 40, 1500)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    alone = PUICLClassifier(weights=small_weights, device="cpu", random_state=3,
                            portfolio="none").fit(X, s)
    assert clf.n_held_out_ > 0 and clf.portfolio_.weighs_model
    assert np.array_equal(clf.portfolio_.member_pool_scores[MODEL],
                          log_odds(alone.fitted_pool_proba()))
    # the evidence's passes lack the held-out positives: they score the pool otherwise
    from puicl_model.estimator.portfolio import judged_pool_rows

    evidence = clf.portfolio_.evidence.pool[0][MODEL]
    judged = judged_pool_rows(1500, clf._entropy, len(evidence))
    assert not np.array_equal(evidence, clf.portfolio_.member_pool_scores[MODEL][judged])


@pytest.mark.slow
@pytest.mark.parametrize("fallback", ["logistic", "model-weighted"])
def test_large_tables_choose_on_a_sample_of_their_held_out_positives(small_weights, rng,
                                                                     monkeypatch,
                                                                     fallback) -> None:
    """Where more positives were held out than the blend is chosen on, the choice reads a
    sample of them, and π̂ reads every one: their scores are then the bits of a fit that
    chose on all of them."""
    import puicl_model.estimator.evidence_rows as evidence_rows
    import puicl_model.estimator.portfolio as portfolio_module
    from puicl_model.estimator.portfolio import judged_held_rows

    original = portfolio_module.choose
    monkeypatch.setattr(portfolio_module, "choose",  # the fallback stands
                        lambda *args, **kwargs: original(*args, **{**kwargs, "z": np.inf}))
    monkeypatch.setattr(portfolio_module, "fallback_on_evidence", lambda *args: fallback)
    import puicl_model.estimator.fitted_table as fitted_table

    monkeypatch.setattr(fitted_table, "undecided", lambda *args: False)  # the first samples
    X, s = _table(rng, 5 * 300, 2500)

    def fitted(judged_held: int) -> PUICLClassifier:
        monkeypatch.setattr(evidence_rows, "JUDGED_HELD_OUT", judged_held)
        clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
        clf.predict_proba(X[s == 0])
        return clf

    every = fitted(10_000)
    sampled = fitted(100)
    assert sampled.choice_.name == every.choice_.name == fallback
    n_held = sampled.n_held_out_
    judged = judged_held_rows(n_held, sampled._entropy, 100)
    assert len(judged) == 100 < n_held
    assert all(len(scores) == 100 for scores in sampled.portfolio_.evidence.held[0].values())
    for member in (LOGISTIC, MODEL):
        assert np.array_equal(sampled.portfolio_.evidence.held[0][member],
                              every.portfolio_.evidence.held[0][member][judged])
    # the blend's probabilities of every held-out positive (what π̂ reads), as with all judged
    held, pool = sampled.held_out_scores()[0]
    assert len(held) == n_held
    assert np.array_equal(held, every.held_out_scores()[0][0])
    assert np.array_equal(pool, every.held_out_scores()[0][1])


@pytest.mark.slow
def test_large_tables_read_more_evidence_where_the_choice_is_close(small_weights, rng,
                                                                  monkeypatch) -> None:
    """While the choice is undecided, the judged samples double up to their most: the larger
    sample holds the smaller, and the model scores only the rows it adds."""
    import puicl_model.estimator.fitted_table as fitted_table
    from puicl_model.estimator.evidence_rows import JUDGED_POOL_ROWS, MOST_JUDGED_POOL_ROWS

    X, s = _table(rng, MIN_LABELED_FOR_HOLD_OUT + 40, 5000)
    calls: list[int] = []
    original = fitted_table.HeldOutEvidence.scores

    def recording(self, pool_rows, held_rows):
        calls.append(len(pool_rows))
        return original(self, pool_rows, held_rows)

    monkeypatch.setattr(fitted_table.HeldOutEvidence, "scores", recording)
    monkeypatch.setattr(fitted_table, "undecided", lambda *args: True)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    assert len(clf.portfolio_.evidence.pool[0][MODEL]) == MOST_JUDGED_POOL_ROWS
    assert JUDGED_POOL_ROWS in calls and MOST_JUDGED_POOL_ROWS in calls
    calls.clear()
    monkeypatch.setattr(fitted_table, "undecided", lambda *args: False)
    decided = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    assert len(decided.portfolio_.evidence.pool[0][MODEL]) == JUDGED_POOL_ROWS
    assert max(calls) == JUDGED_POOL_ROWS
    # the smaller sample is within the larger, and its rows' scores are the same bits
    from puicl_model.estimator.portfolio import judged_pool_rows

    big = judged_pool_rows(5000, clf._entropy, MOST_JUDGED_POOL_ROWS)
    small = judged_pool_rows(5000, clf._entropy, JUDGED_POOL_ROWS)
    where = np.searchsorted(big, small)
    assert np.array_equal(big[where], small)
    assert np.array_equal(clf.portfolio_.evidence.pool[0][MODEL][where],
                          decided.portfolio_.evidence.pool[0][MODEL])


def test_undecided_reads_the_lead_in_standard_errors() -> None:
    from puicl_model.estimator.portfolio import READ_MORE_Z, Choice, undecided

    def choice(lead: float) -> Choice:
        return Choice("model-weighted", {MODEL: 1.0}, {"model-weighted": 0.7,
                                                       LOGISTIC: 0.7 + lead},
                      {"model-weighted": 0.0, LOGISTIC: 0.01}, 300, "")

    assert not undecided(choice(READ_MORE_Z * 0.01 * 0.5), "model-weighted", 3.0)
    assert undecided(choice(0.02), "model-weighted", 3.0)
    assert not undecided(choice(0.05), "model-weighted", 3.0)
    assert not undecided(choice(-0.02), "model-weighted", 3.0)


def test_fit_does_the_work_and_scoring_the_pool_only_reads(small_weights, rng,
                                                            monkeypatch) -> None:
    """``fit`` scores the pool, fits the learners and chooses the blend: predictions of the
    pool's rows then run no pass of the model, fit no learner and leave the classifier's
    attributes as they were."""
    import puicl_model.estimator.fitted_scorer as fitted_scorer
    from puicl_model.estimator.learners import CrossFittedLearner
    from puicl_model.passes.inference import PassScorer

    X, s = _table(rng, 80, 400)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=2,
                          threshold="prior").fit(X, s)
    assert clf.portfolio_ is not None and clf.portfolio_.choice is not None
    assert clf.fitted_.pool_proba is not None and clf.fitted_.class_prior and clf.n_passes_ > 0
    for target, name in ((PassScorer, "__call__"), (CrossFittedLearner, "fit"),
                         (fitted_scorer, "score_new_rows")):
        monkeypatch.setattr(target, name, lambda *a, **k: pytest.fail("work after fit"))
    before = dict(vars(clf))
    pool = X[s == 0]
    proba = clf.predict_proba(pool)
    labels = clf.predict(pool)
    assert proba.shape == (400, 2) and set(np.unique(labels)) <= {0, 1}
    assert clf.choice_ is clf.portfolio_.choice and 0.0 <= clf.estimate_class_prior() <= 1.0
    assert vars(clf).keys() == before.keys()
    assert all(vars(clf)[key] is value for key, value in before.items())
    with pytest.warns(FutureWarning, match="no longer needed"):  # the lazy fit's step
        assert clf.prepare() is clf


def test_where_trees_see_the_signal_the_portfolio_follows_them(small_weights) -> None:
    """An interaction that a linear score and the tiny test model cannot see: the labeled
    positives sit where two columns share their sign. The bagged trees rank the pool far
    better, and the portfolio picks a blend that weighs it."""
    rng = np.random.default_rng(0)
    n_pos, n_neg, n_labeled = 1800, 900, 700
    x = rng.normal(size=(n_pos + n_neg, 4))
    positive = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    same_sign = np.sign(x[:, 0]) == np.sign(x[:, 1])
    x[positive & ~same_sign, 1] *= -1  # positives: same sign; negatives: either
    x[~positive & same_sign, 1] *= -1  # negatives: opposite sign
    s = np.zeros(len(x))
    s[:n_labeled] = 1
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(x, s)
    proba = clf.predict_proba(x[s == 0])[:, 1]
    assert BAGGED in clf.choice_.weights
    assert roc_auc_score(positive[s == 0], proba) > 0.9


def test_a_bad_portfolio_setting_is_named(small_weights, rng) -> None:
    X, s = _table(rng, 20, 30)
    with pytest.raises(ValueError, match="portfolio"):
        PUICLClassifier(weights=small_weights, portfolio="boosted").fit(X, s)


def test_the_portfolio_settings_former_name_stands_for_it(small_weights, rng,
                                                          tmp_path) -> None:
    """``partner``, the setting's former name: set, it stands for ``portfolio`` and warns; a
    save writes the setting under its name; ``puicl predict --partner`` is still taken."""
    import json

    from puicl_model.files.cli import _parser

    X, s = _table(rng, 40, 200)
    with pytest.warns(FutureWarning, match="now named portfolio"):
        old = PUICLClassifier(weights=small_weights, partner="none").fit(X, s)
    new = PUICLClassifier(weights=small_weights, portfolio="none").fit(X, s)
    assert old.portfolio_ is None and new.portfolio_ is None
    assert old.predict_proba(X).tobytes() == new.predict_proba(X).tobytes()
    settings = json.loads((old.save(tmp_path / "saved") / "state.json").read_text())["settings"]
    names = [key for key, _ in settings["__items__"]]
    assert "partner" not in names and ["portfolio", "none"] in settings["__items__"]
    with pytest.raises(ValueError, match="disagree"):
        PUICLClassifier(weights=small_weights, partner="auto", portfolio="none").fit(X, s)
    args = _parser().parse_args(["predict", "--input", "t.csv", "--partner", "none"])
    assert args.portfolio == "none"


@pytest.mark.parametrize("n_labeled", [120, MIN_LABELED_FOR_HOLD_OUT + 40])
def test_learners_fitted_beside_the_passes_give_the_same_bytes(small_weights, rng, monkeypatch,
                                                               n_labeled) -> None:
    """Where the learners are fitted on a thread beside the model's first passes (a GPU's
    option, run here on the CPU), every score has the bytes of the fits one after the other,
    on a small table (the fallback) and on one with held-out positives (the evidence)."""
    import threading

    from puicl_model.estimator import fitted_table
    from puicl_model.estimator.portfolio import Portfolio

    X, s = _table(rng, n_labeled, 900)
    settings = dict(weights=small_weights, device="cpu", random_state=4)
    before = PUICLClassifier(**settings).fit(X, s)
    fitted_on: list[str] = []
    fit_learners = Portfolio.fit_learners

    def recording(self: Portfolio) -> None:
        fitted_on.append(threading.current_thread().name)
        fit_learners(self)

    monkeypatch.setattr(Portfolio, "fit_learners", recording)
    monkeypatch.setattr(fitted_table, "learners_beside", lambda runtime: True)
    beside = PUICLClassifier(**settings).fit(X, s)
    assert fitted_on[0].startswith("puicl-learners")  # then the choice finds them fitted
    assert beside.choice_.name == before.choice_.name
    rows = X[s == 0]
    assert beside.predict_proba(rows).tobytes() == before.predict_proba(rows).tobytes()
    new_rows = X[:7] + 0.5
    assert beside.predict_proba(new_rows).tobytes() == before.predict_proba(new_rows).tobytes()

    def failing_beside(self: Portfolio) -> None:  # fails on the learners' thread only
        if threading.current_thread().name.startswith("puicl-learners"):
            raise RuntimeError("a learner failed")
        fit_learners(self)

    monkeypatch.setattr(Portfolio, "fit_learners", failing_beside)
    with pytest.raises(RuntimeError, match="a learner failed"):
        PUICLClassifier(**settings).fit(X, s)


def test_the_fallback_with_held_out_positives_follows_the_model_against_the_logistic(rng) -> None:
    """The model-weighted blend stands where the model ranks the held-out positives above the
    pool better than the logistic learner does, the logistic learner where it does not."""
    from puicl_model.estimator.portfolio import (
        FALLBACK,
        FALLBACK_WITH_HELD_OUT,
        Evidence,
        fallback_on_evidence,
    )

    held_signal, pool_signal = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 500)

    def evidence(model_noise: float, logistic_noise: float) -> Evidence:
        def scores(signal: np.ndarray, noise: float) -> np.ndarray:
            return signal + noise * rng.normal(size=signal.shape)
        held = {"model": scores(held_signal, model_noise),
                "logistic": scores(held_signal, logistic_noise),
                "bagged": scores(held_signal, 1.0)}
        pool = {"model": scores(pool_signal, model_noise),
                "logistic": scores(pool_signal, logistic_noise),
                "bagged": scores(pool_signal, 1.0)}
        return Evidence([held], [pool])

    members = ("model", "logistic", "bagged")
    assert fallback_on_evidence(evidence(0.1, 2.0), members) == FALLBACK
    assert fallback_on_evidence(evidence(2.0, 0.1), members) == FALLBACK_WITH_HELD_OUT
    # without the model-weighted blend's members, the logistic learner
    assert fallback_on_evidence(evidence(0.1, 2.0), ("model", "logistic")) == \
        FALLBACK_WITH_HELD_OUT


def test_boosted_bags_share_the_forests_bags(rng) -> None:
    """PU bagging over boosted trees draws the forests' bags (the same folds of the positives,
    the same pool rows, under one key): only the learner in each bag differs; its scores are
    the same bytes on one thread or two."""
    from puicl_model.estimator.learners import BAGGED_BOOSTED, CrossFittedLearner

    x_labeled = rng.normal(size=(300, 5)) + 0.8
    x_pool = rng.normal(size=(900, 5))
    forest = CrossFittedLearner(BAGGED, 11, n_threads=1)
    boosted = CrossFittedLearner(BAGGED_BOOSTED, 11, n_threads=1)
    assert forest._seed() == boosted._seed() and forest._seed(3) == boosted._seed(3)
    labeled, pool = boosted.fit(x_labeled, x_pool)
    forest.fit(x_labeled, x_pool)
    assert [type(m).__name__ for m in boosted.models_] == ["HistGradientBoostingClassifier"] * 5
    again = CrossFittedLearner(BAGGED_BOOSTED, 11, n_threads=2).fit(x_labeled, x_pool)
    assert labeled.tobytes() == again[0].tobytes() and pool.tobytes() == again[1].tobytes()


@pytest.mark.slow
def test_boosted_bags_join_only_where_evidence_is_read(small_weights, rng) -> None:
    from puicl_model.estimator.learners import BAGGED_BOOSTED
    from puicl_model.estimator.portfolio import MEMBERS_WITH_EVIDENCE

    small = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(
        *_table(rng, 80, 400))
    assert BAGGED_BOOSTED not in small.portfolio_.learners
    assert small.portfolio_.members == MEMBERS
    large = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(
        *_table(rng, MIN_LABELED_FOR_HOLD_OUT + 40, 1500))
    assert large.portfolio_.members == MEMBERS_WITH_EVIDENCE
    assert BAGGED_BOOSTED in large.portfolio_.learners
    assert any(BAGGED_BOOSTED in name for name in large.choice_.held_out_auc)


def _xor_table(n_pos: int, n_neg: int, n_labeled: int) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """An interaction among 20 columns, 18 of them noise: the positives' first two columns
    share their sign. (X, s, and which rows are positive)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_pos + n_neg, 20))
    positive = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    same_sign = np.sign(x[:, 0]) == np.sign(x[:, 1])
    x[positive & ~same_sign, 1] *= -1
    x[~positive & same_sign, 1] *= -1
    s = np.zeros(len(x))
    s[:n_labeled] = 1
    return x, s, positive


@pytest.mark.slow
def test_folds_are_the_evidence_below_the_hold_out_threshold_on_a_shared_pool(
        small_weights, monkeypatch) -> None:
    """Below MIN_LABELED_FOR_HOLD_OUT labeled positives, on a pool of shared contexts larger
    than the folds' sample, the class prior's folds are the evidence: every labeled positive
    read, the boosted bags a member, chosen on an interaction the forest's random columns miss,
    refitted in more bags; π̂ then scores only the rest of the folds' rows, the same bytes as
    scored whole. A pool of at most PRIOR_POOL_ROWS rows keeps the fallback unread."""
    from puicl_model.estimator import fitted_table
    from puicl_model.estimator.learners import BAGGED_BOOSTED, BOOSTED_BAGS_CHOSEN
    from puicl_model.estimator.portfolio import MEMBERS_WITH_EVIDENCE
    from puicl_model.estimator.prior import DEFAULT_FOLDS, PRIOR_POOL_ROWS

    x, s, positive = _xor_table(1700, 900, 300)  # a pool of 2,300 rows: shared contexts
    assert (s == 0).sum() > PRIOR_POOL_ROWS
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(x, s)
    assert clf.fitted_.planners[0].shares_context
    portfolio = clf.portfolio_
    assert portfolio.n_held == 0 and portfolio.members == MEMBERS_WITH_EVIDENCE
    assert clf.choice_.read_evidence and clf.choice_.n_held_out == 300
    assert clf.choice_.name == BAGGED_BOOSTED, clf.choice_.describe()
    assert len(portfolio.learners[BAGGED_BOOSTED].models_) == BOOSTED_BAGS_CHOSEN
    truth = positive[s == 0]
    assert roc_auc_score(truth, clf.predict_proba(x[s == 0])[:, 1]) > 0.8

    # the choice scored a sample of the folds' pool rows; π̂ scores the rest beside them, and
    # reads the same bytes as the folds scored whole
    kept = clf.fitted_.fold_scores
    assert kept is not None and all(0 < np.isfinite(k).sum() < len(k) for k in kept)

    def no_pass(*args, **kwargs):
        raise AssertionError("the class prior's folds were scored whole again")

    monkeypatch.setattr(fitted_table, "cross_fitted_scores", no_pass)
    assert 0.0 < clf.estimate_class_prior() < 1.0
    monkeypatch.undo()
    whole = fitted_table.cross_fitted_scores(
        clf._runtime().scorer(), clf.fitted_.planners, clf.fitted_.views, DEFAULT_FOLDS,
        clf.fitted_.prior_pool_rows())
    for (held, pool), (held_whole, pool_whole) in zip(clf.fitted_.model_folds[DEFAULT_FOLDS],
                                                      whole, strict=True):
        assert held.tobytes() == held_whole.tobytes() and pool.tobytes() == pool_whole.tobytes()

    smaller = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(
        *_xor_table(1300, 600, 300)[:2])  # a pool of 1,600 rows: shared, but not sampled
    assert smaller.fitted_.planners[0].shares_context
    assert not smaller.choice_.read_evidence and BAGGED_BOOSTED not in smaller.portfolio_.members
    assert not smaller.fitted_.model_folds and smaller.fitted_.fold_scores is None


@pytest.mark.slow
def test_chosen_boosted_bags_are_refitted_with_more_bags(small_weights, tmp_path) -> None:
    """Where the evidence chooses the boosted bags (an interaction among 20 columns, 18 of them
    noise), they are refitted with BOOSTED_BAGS_CHOSEN bags once the choice is final: the
    evidence keeps the judged bags' scores, the pool and new rows read the stronger member,
    and a save loads to the same bytes. The forest, not chosen, keeps its bags."""
    from puicl_model.estimator.learners import BAGGED_BOOSTED, BAGS, BOOSTED_BAGS_CHOSEN

    x, s, positive = _xor_table(1800, 900, 700)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(x, s)
    portfolio = clf.portfolio_
    assert clf.choice_.name == BAGGED_BOOSTED, clf.choice_.describe()
    boosted = portfolio.learners[BAGGED_BOOSTED]
    assert len(boosted.models_) == BOOSTED_BAGS_CHOSEN
    assert len(portfolio.learners[BAGGED].models_) == BAGS
    # the choice read the judged bags' scores; the pool reads the refitted member's
    five = type(boosted)(BAGGED_BOOSTED, boosted.entropy, n_threads=1)
    five_labeled, five_pool = five.fit(portfolio.x_labeled, portfolio.x_pool)
    read = portfolio.evidence.held[0][BAGGED_BOOSTED]
    assert np.isin(read, five_labeled).all()
    assert not np.isin(read, portfolio.labeled_scores[BAGGED_BOOSTED]).all()
    assert not np.array_equal(portfolio.pool_scores[BAGGED_BOOSTED], five_pool)
    truth = positive[s == 0]
    assert (roc_auc_score(truth, portfolio.pool_scores[BAGGED_BOOSTED])
            > roc_auc_score(truth, five_pool))
    clf.save(tmp_path / "saved")
    loaded = PUICLClassifier.load(tmp_path / "saved")
    new_rows = x[s == 0][:50] + 1e-3
    assert np.array_equal(loaded.predict_proba(new_rows), clf.predict_proba(new_rows))


def _scored_portfolio(rng: np.random.Generator, boosted_signal: float, n_labeled: int = 400,
                      n_pool: int = 1000):
    """A portfolio reading the class prior's folds, its learners' scores given: every
    member separates the pool's positive half by 0.3 (log-odds) but the boosted bags, by
    ``boosted_signal``."""
    from puicl_model.estimator.learners import BAGGED_BOOSTED
    from puicl_model.estimator.portfolio import MEMBERS_WITH_EVIDENCE, Portfolio

    positive = np.arange(n_pool) < n_pool // 2
    signal = {LOGISTIC: 0.3, BAGGED: 0.3, BAGGED_BOOSTED: boosted_signal}
    portfolio = Portfolio(0, None, np.zeros((n_labeled, 1)), np.zeros((n_pool, 1)), 0,
                          members=MEMBERS_WITH_EVIDENCE,
                          learners={kind: object() for kind in signal},
                          labeled_scores={k: rng.normal(size=n_labeled) + v
                                          for k, v in signal.items()},
                          pool_scores={k: rng.normal(size=n_pool) + v * positive
                                       for k, v in signal.items()})
    model_pool = 1.0 / (1.0 + np.exp(-(rng.normal(size=n_pool) + 0.3 * positive)))
    return portfolio, model_pool


def test_the_fallback_takes_the_trees_whose_own_evidence_clearly_leads(rng) -> None:
    """Where the evidence leaves the model-weighted blend standing, its tree place goes to the
    boosted bags only where their out-of-fold scores of every labeled positive lead the
    forests' by TREES_Z standard errors; a candidate the evidence chooses is kept as it is."""
    from puicl_model.estimator.learners import BAGGED_BOOSTED
    from puicl_model.estimator.portfolio_rule import TREES_Z, fallback_weights, stronger_trees

    def chosen(boosted_signal: float, held: int):
        portfolio, model_pool = _scored_portfolio(rng, boosted_signal)
        # the fold: `held` of the labeled positives against every pool row
        mask = np.zeros(len(portfolio.x_labeled), bool)
        mask[:held] = True
        model_held = 1.0 / (1.0 + np.exp(-(rng.normal(size=held) + 0.3)))
        return portfolio, portfolio.choose_on([(model_held, model_pool)], [mask], None)

    # 30 held-out positives settle nothing; 400 labeled ones show the boosted bags' lead
    portfolio, choice = chosen(1.0, held=30)
    trees, lead_se = stronger_trees(portfolio.labeled_scores, portfolio.pool_scores)
    assert trees == BAGGED_BOOSTED and lead_se > TREES_Z
    assert choice.name == FALLBACK and dict(choice.weights) == fallback_weights(BAGGED_BOOSTED)
    assert dict(choice.weights) == {MODEL: 0.6, LOGISTIC: 0.2, BAGGED_BOOSTED: 0.2}
    assert "bagged-boosted stand in bagged's place" in choice.reason
    # the same trees, no lead: the forests stay
    portfolio, choice = chosen(0.3, held=30)
    assert stronger_trees(portfolio.labeled_scores, portfolio.pool_scores)[0] == BAGGED
    assert choice.name == FALLBACK and dict(choice.weights) == dict(FALLBACK_WEIGHTS)
    # where the evidence itself chooses the boosted bags' blend, the choice is not touched
    portfolio, choice = chosen(3.0, held=300)
    assert choice.name != FALLBACK and choice.weights == CANDIDATES.get(
        choice.name, choice.weights) and "stand in" not in choice.reason
    # without boosted bags (the unread fallback's members) nothing is read
    assert stronger_trees({BAGGED: np.zeros(3)}, {BAGGED: np.zeros(5)}) == (BAGGED, 0.0)


def test_a_choice_weighing_the_model_beside_boosted_bags_gives_way_to_them_where_it_trails(
        rng) -> None:
    """Once the evidence is read, a choice that weighs the model beside the boosted bags (the
    fallback with them in its tree place, or a blend the evidence chose) gives way to the
    boosted bags alone where their own evidence leads the forests' by more than TREES_Z and
    they rank the held-out positives above the model alone by more than WEAK_MODEL_Z standard
    errors; a model that leads, trees that do not lead the forests, or a choice without the
    model or the boosted bags are kept as they are."""
    from dataclasses import replace

    from puicl_model.estimator.learners import BAGGED_BOOSTED
    from puicl_model.estimator.portfolio_rule import (
        TREES_Z,
        WEAK_MODEL_Z,
        Choice,
        fallback_weights,
        trees_over_weak_model,
    )

    aucs = {MODEL: 0.6, BAGGED_BOOSTED: 0.6, FALLBACK: 0.6}  # keys as a fit's choice holds them
    swapped = Choice(FALLBACK, fallback_weights(BAGGED_BOOSTED), aucs, {}, 300, "stood")
    trailing = _evidence(rng, {MODEL: 0.0, BAGGED_BOOSTED: 0.8})
    strong_trees = TREES_Z + 1.0
    chosen, lead_se = trees_over_weak_model(swapped, trailing, strong_trees)
    assert lead_se > WEAK_MODEL_Z
    assert chosen.name == BAGGED_BOOSTED and dict(chosen.weights) == {BAGGED_BOOSTED: 1.0}
    assert chosen.reason.startswith("stood; ") and "stand alone" in chosen.reason
    assert chosen.held_out_auc == aucs  # what the choice read is kept
    # a blend the evidence chose that weighs both: the same
    blend = replace(swapped, name="model+bagged-boosted",
                    weights={MODEL: 0.5, BAGGED_BOOSTED: 0.5})
    assert trees_over_weak_model(blend, trailing, strong_trees)[0].name == BAGGED_BOOSTED
    # trees that do not clearly lead the forests: kept, however far the model trails
    assert trees_over_weak_model(blend, trailing, TREES_Z)[0] is blend
    # the model leading: kept
    leading = _evidence(rng, {MODEL: 0.8, BAGGED_BOOSTED: 0.0})
    kept, lead_se = trees_over_weak_model(swapped, leading, strong_trees)
    assert kept is swapped and lead_se < WEAK_MODEL_Z
    # no boosted bags beside the model (the fallback with the forests, the logistic learner),
    # or no model beside them: kept
    for weights in (dict(FALLBACK_WEIGHTS), {LOGISTIC: 1.0},
                    {LOGISTIC: 0.5, BAGGED_BOOSTED: 0.5}):
        other = replace(swapped, name="+".join(weights), weights=weights)
        assert trees_over_weak_model(other, trailing, strong_trees)[0] is other


def test_settling_refits_the_boosted_bags_that_stand_alone(rng) -> None:
    """``Portfolio.settle`` applies the rule to the choice the evidence left (the boosted bags
    alone where the model trails them, the fallback where it leads), then refits the boosted
    bags the final choice weighs with BOOSTED_BAGS_CHOSEN bags."""
    from puicl_model.estimator.learners import BAGGED_BOOSTED, BAGS, BOOSTED_BAGS_CHOSEN
    from puicl_model.estimator.portfolio import Portfolio
    from puicl_model.estimator.portfolio_rule import (
        TREES_Z,
        Choice,
        fallback_weights,
        stronger_trees,
    )

    x, s, _ = _xor_table(300, 300, 120)
    labeled = s == 1
    aucs = {MODEL: 0.6, BAGGED_BOOSTED: 0.6, FALLBACK: 0.6}
    for model_signal, stands in ((0.0, False), (3.0, True)):
        portfolio = Portfolio.build(x, labeled, None, 0, n_threads=1, folds=True)
        portfolio.fit_learners()
        assert len(portfolio.learners[BAGGED_BOOSTED].models_) == BAGS
        # an interaction the forests' random columns miss: the boosted bags clearly lead them
        assert stronger_trees(portfolio.labeled_scores, portfolio.pool_scores)[1] > TREES_Z
        held_scores = portfolio.labeled_scores[BAGGED_BOOSTED][:60]
        pool_scores = portfolio.pool_scores[BAGGED_BOOSTED]
        # the model: noise plus its signal towards the held-out positives
        model_held = rng.normal(size=60) + model_signal
        portfolio.evidence = Evidence(
            [{MODEL: model_held, BAGGED_BOOSTED: held_scores}],
            [{MODEL: rng.normal(size=len(pool_scores)), BAGGED_BOOSTED: pool_scores}])
        portfolio.choice = Choice(FALLBACK, fallback_weights(BAGGED_BOOSTED), aucs, {}, 60, "")
        portfolio.settle()
        assert (portfolio.choice.name == FALLBACK) == stands
        # the fallback holding them weighs them too: refitted either way
        assert len(portfolio.learners[BAGGED_BOOSTED].models_) == BOOSTED_BAGS_CHOSEN


@pytest.mark.slow
def test_where_nothing_clears_the_bar_and_the_model_trails_the_boosted_bags_stand_alone(
        small_weights, monkeypatch) -> None:
    """A fit's own path: on an interaction among 20 columns that the forests' random columns
    miss, with no candidate let past the bar, the fallback takes the boosted bags in its tree
    place, the model trails them on the held-out positives, and they stand alone, refitted in
    BOOSTED_BAGS_CHOSEN bags: the model scores no pool row beyond the evidence's."""
    from puicl_model.estimator import portfolio as portfolio_module
    from puicl_model.estimator.learners import BAGGED_BOOSTED, BOOSTED_BAGS_CHOSEN

    def no_clear_lead(evidence, members, *, fallback=FALLBACK, z=3.0):
        return choose(evidence, members, fallback=fallback, z=float("inf"))

    monkeypatch.setattr(portfolio_module, "choose", no_clear_lead)
    x, s, positive = _xor_table(1800, 900, 700)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(x, s)
    assert clf.choice_.name == BAGGED_BOOSTED, clf.choice_.describe()
    assert "no candidate leads" in clf.choice_.reason and "stand alone" in clf.choice_.reason
    assert len(clf.portfolio_.learners[BAGGED_BOOSTED].models_) == BOOSTED_BAGS_CHOSEN
    assert not clf.portfolio_.weighs_model
    truth = positive[s == 0]
    assert roc_auc_score(truth, clf.predict_proba(x[s == 0])[:, 1]) > 0.8
