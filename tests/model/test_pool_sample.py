"""Pools beyond ``pool_sample``: fitted on a seeded sample, every row still scored, and the fit
is the one a reader that gathers the same rows from files builds
(puicl_model.estimator.pool_sample)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.pool_sample import fitted_table, sampled_pool_rows


def test_the_sample_is_keyed_by_the_seed_and_the_pool_size_alone() -> None:
    first = sampled_pool_rows(1000, 100, entropy=5)
    assert first is not None and len(first) == 100 and len(set(first)) == 100
    assert (np.diff(first) > 0).all() and first.max() < 1000
    np.testing.assert_array_equal(sampled_pool_rows(1000, 100, entropy=5), first)
    assert not np.array_equal(sampled_pool_rows(1000, 100, entropy=6), first)
    assert sampled_pool_rows(100, 100, entropy=5) is None  # not exceeded: the whole pool
    assert sampled_pool_rows(10**6, None, entropy=5) is None


def test_a_large_pool_is_fitted_on_its_sample_and_every_row_is_scored(small_weights, table,
                                                                       rng) -> None:
    X, s = table(rng, 20, 300, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["kind"] = rng.choice(["x", "y"], len(frame))
    clf = PUICLClassifier(weights=small_weights, pool_sample=120, random_state=3).fit(frame, s)
    assert clf.n_pool_in_ == 300 and len(clf.x_pool_) == 120
    pool = frame[s == 0]
    proba = clf.predict_proba(pool)[:, 1]
    assert proba.shape == (300,) and np.isfinite(proba).all()
    # the fit is the one on the labeled rows and the sampled rows, in their order: what
    # puicl predict gathers from files without holding the table
    reduced, labeled = fitted_table(frame, s == 1, 120, entropy=3)
    direct = PUICLClassifier(weights=small_weights, pool_sample=120, random_state=3)
    direct.fit(reduced, labeled.astype(int))
    np.testing.assert_array_equal(direct.predict_proba(pool)[:, 1], proba)
    assert direct.estimate_class_prior() == clf.estimate_class_prior()
    # the sampled rows keep their transductive scores; the others are new rows
    kept = sampled_pool_rows(300, 120, entropy=3)
    np.testing.assert_array_equal(proba[kept], clf.predict_proba(reduced[~labeled])[:, 1])


def test_pools_within_the_sample_size_are_fitted_whole(small_weights, table, rng) -> None:
    X, s = table(rng, 20, 100, 3)
    whole = PUICLClassifier(weights=small_weights, pool_sample=None).fit(X, s)
    bounded = PUICLClassifier(weights=small_weights, pool_sample=100).fit(X, s)
    np.testing.assert_array_equal(bounded.predict_proba(X[s == 0]), whole.predict_proba(X[s == 0]))
    assert len(bounded.x_pool_) == 100


@pytest.mark.parametrize("value", [1, 2, 5, 20, 99, 0, -5, 2.5, "all", True])
def test_a_bad_pool_sample_is_one_line_naming_it(small_weights, table, rng, value) -> None:
    # below 100 rows the report's interval would not count the sample's own error
    X, s = table(rng, 10, 20, 2)
    with pytest.raises(ValueError, match=r"^pool_sample: must be an integer >= 100, got "):
        PUICLClassifier(weights=small_weights, pool_sample=value).fit(X, s)
