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


def counting(monkeypatch, module) -> list[int]:
    """Every draw of a pool sample through ``module.sampled_pool_rows``, counted."""
    from puicl_model.estimator import pool_sample

    calls: list[int] = []
    original = pool_sample.sampled_pool_rows

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "sampled_pool_rows", counted)
    return calls


def test_fit_given_the_sample_draws_none_and_fits_what_the_whole_table_fits(
        small_weights, table, rng, monkeypatch) -> None:
    from puicl_model.estimator import pool_sample

    X, s = table(rng, 20, 300, 3)
    whole = PUICLClassifier(weights=small_weights, pool_sample=120, random_state=3).fit(X, s)
    reduced, labeled = fitted_table(X, s == 1, 120, entropy=3)
    draws = counting(monkeypatch, pool_sample)
    given = PUICLClassifier(weights=small_weights, pool_sample=120, random_state=3)
    given.fit(reduced, labeled.astype(int), sampled_from=300)
    assert draws == []  # the caller's sample, not drawn again
    assert given.n_pool_in_ == whole.n_pool_in_ == 300 and len(given.x_pool_) == 120
    np.testing.assert_array_equal(given.predict_proba(X[s == 0]), whole.predict_proba(X[s == 0]))


@pytest.mark.parametrize(("n_unlabeled", "sampled_from", "message"), [
    (150, 300, "sampled_from=300: X holds 150 unlabeled rows, where the seeded sample of a "
               "pool of 300 holds 120 (pool_sample=120)"),
    (120, 100, "sampled_from=100: X holds 120 unlabeled rows, where the seeded sample of a "
               "pool of 100 holds 100 (pool_sample=120)"),
    (120, "300", "sampled_from must be the number of unlabeled rows the pool's sample was "
                 "drawn from, got '300'"),
    (120, True, "sampled_from must be the number of unlabeled rows the pool's sample was "
                "drawn from, got True"),
])
def test_a_sample_that_does_not_fit_sampled_from_is_refused_in_one_line(
        small_weights, table, rng, n_unlabeled, sampled_from, message) -> None:
    X, s = table(rng, 20, n_unlabeled, 3)
    clf = PUICLClassifier(weights=small_weights, pool_sample=120)
    with pytest.raises(ValueError) as refused:
        clf.fit(X, s, sampled_from=sampled_from)
    assert str(refused.value) == message
    assert not hasattr(clf, "planner_")


def test_the_sample_is_asked_whether_s_looks_inverted_by_the_whole_tables_counts(
        small_weights, table, rng) -> None:
    import warnings

    from puicl_model.estimator.input_checks import InvertedLabelsWarning, check_pu_table

    X, s = table(rng, 150, 120, 3)  # 150 labeled rows beside a sample of 120 ...
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvertedLabelsWarning)
        check_pu_table(X, s, sampled_from=400, pool_sample=120)  # ... of a pool of 400: fine
    with pytest.warns(InvertedLabelsWarning, match=r"\(150 rows with s = 1\) than unlabeled "
                                                   r"\(130 with s = 0\)"):
        check_pu_table(X, s, sampled_from=130, pool_sample=120)


def test_a_row_marked_new_is_scored_as_a_new_row_whatever_it_equals(small_weights, table,
                                                                     rng) -> None:
    from puicl_model.estimator.pool_sample import NEW_ROW

    X, s = table(rng, 20, 60, 3)
    clf = PUICLClassifier(weights=small_weights, threshold="prior").fit(X, s)
    pool, fresh = X[s == 0][:4], X[s == 0][:4] + 0.25
    fitted = clf.predict_proba(pool)[:, 1]
    by_value, labels = clf.predict_and_proba(pool, pool_rows=[-1] * 4)
    np.testing.assert_array_equal(by_value[:, 1], fitted)  # -1: found by its values
    new, _ = clf.predict_and_proba(pool, pool_rows=[NEW_ROW] * 4)
    assert not np.array_equal(new[:, 1], fitted)  # scored next to the pool, not as in it
    # a new row's score, whatever else the call holds: the same bytes as predict_proba's of
    # rows it does not know, and cut as new rows are (no fitted row's label)
    rows = np.vstack([pool, fresh])
    mixed, _ = clf.predict_and_proba(rows, pool_rows=[0, -1, NEW_ROW, -1, NEW_ROW, -1, NEW_ROW, 2])
    np.testing.assert_array_equal(mixed[:4, 1], [fitted[0], fitted[1], new[2, 1], fitted[3]])
    # a row it does not know: the bytes predict_proba gives it, cut as new rows are cut
    fresh_proba, fresh_labels = clf.predict_and_proba(fresh, pool_rows=[NEW_ROW] * 4)
    np.testing.assert_array_equal(fresh_proba, clf.predict_proba(fresh))
    np.testing.assert_array_equal(mixed[4:7], fresh_proba[:3])
    assert mixed[7, 1] == fitted[2]  # a position: the row's values are not read
    np.testing.assert_array_equal(fresh_labels, clf.predict(fresh))
    np.testing.assert_array_equal(labels, clf.predict(pool))
    with pytest.raises(ValueError, match=r"^pool_rows must be -1, -2 or positions among the 60 "):
        clf.predict_and_proba(pool, pool_rows=[0, -3, 0, 0])
