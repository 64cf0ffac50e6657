"""Shared contexts (``large_pool="shared"``): the plan, and what the classifier scores with it.

A pool larger than one pass is scored against one context per member and feature group, every
other pool row (and every new row) a query row of it (:mod:`puicl_model.passes.planning`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from puicl_model.estimator.prior import DEFAULT_FOLDS
from puicl_model.passes.planning import PassPlanner, ViewRows
from puicl_model.passes.query_rows import score_new_rows
from puicl_model.passes.settings import InferenceSettings


def planner(n_pool: int, shared: bool = True, **fields) -> PassPlanner:
    base = dict(n_labeled=500, n_pool=n_pool, n_features=30, single_pass_limit=1024,
                chunk_size=600, max_labeled=300, max_features=20, entropy=7,
                shared_context=shared)
    return PassPlanner(**(base | fields))


def test_a_shared_context_draws_half_its_rows_from_the_least_positive_third() -> None:
    n_pool = 3000
    score = np.random.default_rng(0).normal(size=n_pool)
    plan = planner(n_pool)
    passes = list(plan.pool_passes(score))
    assert len(passes) == plan.n_feature_groups == 2  # 30 features: two groups, one pass each
    least = set(np.argsort(score)[: n_pool // 3].tolist())
    for item in passes:
        assert len(item.pool) == 600 and len(item.labeled) == 300
        # every pool row once: in the context or a query row of it
        np.testing.assert_array_equal(np.sort(np.r_[item.pool, item.queries]),
                                      np.arange(n_pool))
        from_least = sum(row in least for row in item.pool.tolist())
        # half drawn from the least positive third, and a third of the rest falls there too
        assert 300 <= from_least <= 300 + 150 + 60
    # each feature group draws its own context, the same on every call
    assert not np.array_equal(passes[0].pool, passes[1].pool)
    np.testing.assert_array_equal(next(plan.pool_passes(score)).pool, passes[0].pool)
    with pytest.raises(ValueError, match="ranking score"):
        next(plan.pool_passes(None))


def test_new_rows_join_the_shared_context_of_every_group() -> None:
    plan = planner(3000)
    score = np.arange(3000.0)
    contexts = list(plan.new_row_contexts(np.zeros((5, 30)), score))
    assert [item.group for item in contexts] == [0, 1]
    for item, pool_pass in zip(contexts, plan.pool_passes(score), strict=True):
        np.testing.assert_array_equal(item.new, np.arange(5))
        np.testing.assert_array_equal(item.pool, pool_pass.pool)
    assert plan.n_contexts == 1 and planner(3000, shared=False).n_contexts == 5


def test_pools_of_one_pass_are_planned_as_before() -> None:
    # the paper's sizes: a pool of at most single_pass_limit rows is one pass either way
    shared, chunks = planner(1000, n_features=10), planner(1000, shared=False, n_features=10)
    assert not shared.shares_context
    (one,), (other,) = shared.pool_passes(None), chunks.pool_passes()
    for name in ("labeled", "pool", "features"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name))
    assert one.queries is None


def test_large_pool_is_checked_by_name_and_left_out_of_old_identities() -> None:
    with pytest.raises(ValueError, match="large_pool"):
        InferenceSettings(large_pool="local").validate()
    # results stored before the setting existed were scored in chunks, and keep their keys
    assert "large_pool" not in InferenceSettings(large_pool="chunks").identity()
    assert InferenceSettings().identity()["large_pool"] == "shared"


def test_a_small_table_scores_the_same_bits_with_either_setting(small_weights, table,
                                                                rng) -> None:
    from puicl_model import PUICLClassifier

    X, s = table(rng, 40, 600, 4)
    scores = [PUICLClassifier(weights=small_weights, portfolio="none", large_pool=mode,
                              random_state=0).fit(X, s).predict_proba(X)
              for mode in ("chunks", "shared")]
    np.testing.assert_array_equal(*scores)


@pytest.fixture(scope="module")
def shared_classifier(small_weights):
    from puicl_model import PUICLClassifier

    from .conftest import pu_table

    X, s = pu_table(np.random.default_rng(5), 60, 1500, 5)
    return PUICLClassifier(weights=small_weights, portfolio="none", large_pool="shared",
                           n_estimators=2, random_state=0).fit(X, s)


def test_pool_rows_outside_the_context_score_as_new_rows_do(shared_classifier) -> None:
    clf = shared_classifier
    pool = clf.fitted_pool_proba()
    outside = [set(item.queries.tolist()) for planner in clf.planners_
               for item in planner.pool_passes(clf.views_[planner.view].pool_score)]
    rows = np.array(sorted(set.intersection(*outside)))[:70]
    views = [view.rows() for view in clf.views_]
    as_new = score_new_rows(clf.model_, views, [view.x_pool[rows] for view in clf.views_],
                            clf.planners_, progress=False)
    np.testing.assert_array_equal(as_new, pool[rows])


def test_a_shared_context_is_scored_by_the_one_forward_that_builds_its_cache(
        shared_classifier, monkeypatch) -> None:
    import torch

    from puicl_model.passes import inference
    from puicl_model.passes.query_rows import context_cache, query_probabilities

    clf = shared_classifier
    views = [view.rows() for view in clf.views_]
    planner = clf.planners_[0]
    item = next(planner.pool_passes(views[planner.view].pool_score))
    view = views[item.view]
    monkeypatch.setattr(inference, "inference_logits", lambda *args: pytest.fail("batched"))
    proba = inference.run_passes(clf.model_, views, iter([item]), n_scored=len(view.pool))
    context = np.concatenate([view.labeled[item.labeled], view.pool[item.pool]])
    cache = context_cache(clf.model_, torch.from_numpy(context[:, item.features]),
                          len(item.labeled))
    own = torch.softmax(cache.row_logits[len(item.labeled):], dim=-1)[:, 1]
    np.testing.assert_array_equal(proba[item.pool], own.numpy())
    queries = torch.from_numpy(view.pool[item.queries][:, item.features])
    np.testing.assert_array_equal(proba[item.queries],
                                  query_probabilities(clf.model_, cache, queries).numpy())


def test_the_class_prior_folds_and_saves_work_with_shared_contexts(shared_classifier,
                                                                    tmp_path, rng) -> None:
    from puicl_model import PUICLClassifier

    clf = shared_classifier
    folds = clf.held_out_scores()
    assert len(folds) == DEFAULT_FOLDS and all(np.isfinite(held).all() for held, _ in folds)
    assert 0.0 <= clf.estimate_class_prior() <= 1.0
    x_new = rng.normal(size=(20, 5))
    expected = clf.predict_proba(x_new)
    for training_data in (True, False):
        folder = clf.save(tmp_path / f"saved_{training_data}", training_data=training_data)
        loaded = PUICLClassifier.load(folder, device="cpu")
        np.testing.assert_array_equal(loaded.predict_proba(x_new), expected)


def test_view_rows_carry_the_subset_of_the_ranking(shared_classifier) -> None:
    view = shared_classifier.views_[0]
    rows = np.array([3, 1, 4])
    picked = view.rows(rows)
    assert isinstance(picked, ViewRows)
    np.testing.assert_array_equal(picked.pool_score, view.pool_score[rows])
    np.testing.assert_array_equal(picked.pool, view.x_pool[rows])


def test_a_subset_of_the_pool_scores_as_the_whole_pool_does(shared_classifier) -> None:
    # the portfolio scores some pool rows first and the rest later: against the same contexts,
    # each row gets the bytes the whole pool's scoring gives it
    clf = shared_classifier
    views = [view.rows() for view in clf.views_]
    whole, _ = clf.scorer_(clf.planners_, views)
    rows = np.array([1400, 3, 77, 500, 501, 1499])
    part, _ = clf.scorer_(clf.planners_, views, rows=rows)
    np.testing.assert_array_equal(part, whole[rows])
    chunked = dataclasses.replace(clf.planners_[0], shared_context=False)
    with pytest.raises(ValueError, match="only shared contexts"):
        next(chunked.pool_passes(None, rows))


def test_new_rows_reuse_the_contexts_the_pool_was_scored_with(small_weights, table, rng,
                                                              monkeypatch) -> None:
    from puicl_model import PUICLClassifier
    from puicl_model.passes import query_rows

    X, s = table(rng, 40, 1500, 4)
    x_new = rng.normal(size=(50, 4))
    # fit scores the pool: its shared context's cache is kept
    kept = PUICLClassifier(weights=small_weights, portfolio="none", random_state=0).fit(X, s)
    fresh = PUICLClassifier(weights=small_weights, portfolio="none", random_state=0,
                            context_cache_bytes=0).fit(X, s)
    built: list[int] = []
    original = query_rows.context_cache
    monkeypatch.setattr(query_rows, "context_cache",
                        lambda *args: built.append(1) or original(*args))
    reused = kept.predict_proba(x_new)
    assert built == []  # the first call after fit builds no context
    np.testing.assert_array_equal(reused, fresh.predict_proba(x_new))  # computed anew: same
    assert len(built) == 1
