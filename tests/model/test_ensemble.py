"""Inference-time ensemble members (puicl_model.estimator.ensemble): n_estimators=1 is the single
pass,
members differ in what the model sees, every draw is reproducible, wide and chunked tables
are scored whole by every member."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import puicl_model.passes.inference
from puicl_model import PUICLClassifier
from puicl_model.estimator.ensemble import MEMBERS, Member, members_for
from puicl_model.estimator.preprocessing import TablePreprocessor
from puicl_model.net.batch import collate_tasks
from puicl_model.passes.settings import InferenceSettings


def direct_proba(model, x_labeled: np.ndarray, x_pool: np.ndarray) -> np.ndarray:
    """P(y=1) of the pool rows in one forward pass of [labeled; pool], as the classifier
    computes a single pass."""
    x = np.vstack([x_labeled, x_pool]).astype(np.float32)
    with torch.inference_mode():
        logits = puicl_model.passes.inference.inference_logits(model, collate_tasks([x],
                                                                             [len(x_labeled)]))
    return torch.softmax(logits.float(), -1)[0, len(x_labeled):, 1].numpy().astype(np.float64)


class ForwardLog:
    """The (n_labeled, n_rows, n_features) of every task the classifier's forward passes
    hold, in order."""

    def __init__(self, model: torch.nn.Module | None, monkeypatch: pytest.MonkeyPatch) -> None:
        """``model`` None: every model's forwards (a fit's, which loads its model), until
        :meth:`stop`."""
        self.tasks: list[tuple[int, int, int]] = []
        self.recording = True
        original = puicl_model.passes.inference.inference_logits

        def recording(called, batch):
            if called is model or (model is None and self.recording):
                self.tasks.extend(batch.sizes())
            return original(called, batch)

        monkeypatch.setattr(puicl_model.passes.inference, "inference_logits", recording)

    def stop(self) -> None:
        self.recording = False


def test_one_member_is_the_single_pass_bit_for_bit(small_weights, table, rng,
                                                  monkeypatch) -> None:
    X, s = table(rng, 30, 50, 6)
    log = ForwardLog(None, monkeypatch)
    one = PUICLClassifier(weights=small_weights, n_estimators=1).fit(X, s)
    log.stop()
    proba = one.predict_proba(X[s == 0])[:, 1]
    assert log.tasks == [(30, 80, 6)]
    # the pre-ensemble computation: one forward pass over [labeled; pool] of the configured
    # encoding (normal scores), every bit equal
    np.testing.assert_array_equal(proba, direct_proba(one.model_, one.x_labeled_, one.x_pool_))
    default = PUICLClassifier(weights=small_weights).fit(X, s)
    np.testing.assert_array_equal(default.predict_proba(X[s == 0])[:, 1], proba)


def test_two_members_average_two_views(small_weights, table, rng, monkeypatch) -> None:
    X, s = table(rng, 30, 50, 6)
    X[:, 0] = np.exp(2 * X[:, 0])  # skewed: the power view differs from the normal scores
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, n_estimators=2).fit(X, s)
    log.stop()
    assert [p.member for p in clf.planners_] == [0, 1] and len(clf.views_) == 2
    assert clf.views_[1].preprocessor.numeric == MEMBERS[1].numeric == "power"
    proba = clf.predict_proba(X[s == 0])[:, 1]
    assert log.tasks == [(30, 80, 6)] * 2
    base = direct_proba(clf.model_, clf.x_labeled_, clf.x_pool_)
    other = direct_proba(clf.model_, clf.views_[1].x_labeled, clf.views_[1].x_pool)
    assert not np.allclose(base, other, atol=1e-4)  # the members see different tables
    np.testing.assert_allclose(proba, (base + other) / 2, rtol=0, atol=1e-6)
    assert np.all((proba >= 0) & (proba <= 1))
    # new rows are scored by both members, each in its own encoding
    new = rng.normal(size=(7, 6))
    new_proba = clf.predict_proba(new)[:, 1]
    assert np.isfinite(new_proba).all()
    one = PUICLClassifier(weights=small_weights, n_estimators=1).fit(X, s)
    assert not np.allclose(one.predict_proba(new)[:, 1], new_proba, atol=1e-4)
    assert 0.0 <= clf.estimate_class_prior() <= 1.0


def test_members_take_labeled_and_feature_subsets(small_weights, table, rng,
                                                 monkeypatch) -> None:
    X, s = table(rng, 30, 50, 10)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, n_estimators=5).fit(X, s)
    log.stop()
    # base, power-ordinal, standard-frequency, 70 % of the features and labeled rows, half of
    # the labeled rows
    assert log.tasks == [(30, 80, 10), (30, 80, 10), (30, 80, 10), (21, 71, 7), (15, 65, 10)]
    subset = clf.planners_[3].features_of(0)
    assert len(subset) == 7 and len(set(subset.tolist())) == 7


def test_ensemble_is_reproducible_and_keyed_by_random_state(small_weights, table, rng) -> None:
    X, s = table(rng, 30, 50, 10)
    new = rng.normal(size=(5, 10))

    def run(seed: int) -> np.ndarray:
        clf = PUICLClassifier(weights=small_weights, n_estimators=5, random_state=seed)
        clf.fit(X, s)
        return np.r_[clf.predict_proba(X[s == 0])[:, 1], clf.predict_proba(new)[:, 1]]

    np.testing.assert_array_equal(run(4), run(4))
    assert not np.array_equal(run(4), run(5))  # the subsets are drawn from random_state


def test_members_beyond_the_catalogue_repeat_only_with_fresh_draws(small_weights, table,
                                                                   rng) -> None:
    X, s = table(rng, 30, 50, 6)
    count = len(MEMBERS)
    clf = PUICLClassifier(weights=small_weights, n_estimators=count + 4).fit(X, s)
    # inside the trained range members 0, 1 and 2 (no random draw) would repeat exactly:
    # skipped; the feature-subset member repeats with a labeled subset of its own
    assert [p.member for p in clf.planners_] == [*range(count), count + 3]
    assert not np.array_equal(clf.planners_[3].labeled_of(0, 0),
                              clf.planners_[-1].labeled_of(0, 0))
    assert members_for(count + 1)[count] == MEMBERS[0]


def test_wide_chunked_tables_are_scored_whole_by_every_member(small_weights, table, rng,
                                                              monkeypatch) -> None:
    X, s = table(rng, 20, 90, 45)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(45)])
    frame["colour"] = pd.Categorical(rng.choice(list("abcdefgh"), size=len(frame)))
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, n_estimators=2, single_pass_limit=60,
                          chunk_size=40, large_pool="chunks", random_state=2).fit(frame, s)
    log.stop()
    base, power = clf.planners_
    # one-hot gives 45 + 8 features (3 groups), ordinal codes 45 + 1 (3 groups)
    assert (base.n_features, power.n_features) == (53, 46)
    assert base.n_feature_groups == 3 == power.n_feature_groups
    for planner in clf.planners_:  # every row with every feature, once per member
        seen = np.zeros((planner.n_pool, planner.n_features), dtype=int)
        for item in planner.pool_passes():
            seen[np.ix_(item.pool, item.features)] += 1
        assert (seen == 1).all()
    proba = clf.predict_proba(frame[s == 0])[:, 1]
    assert np.isfinite(proba).all() and len(proba) == 90
    assert len(log.tasks) == clf.n_passes_ == 2 * 3 * 3  # members x groups x chunks
    assert np.isfinite(clf.predict_proba(frame.iloc[:4])[:, 1]).all()  # labeled rows: new


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_invalid_n_estimators_is_a_clear_error(small_weights, table, rng, value) -> None:
    X, s = table(rng, 10, 20, 3)
    with pytest.raises(ValueError, match=r"n_estimators: must be an integer >= 1, got"):
        PUICLClassifier(weights=small_weights, n_estimators=value).fit(X, s)


def test_an_absurd_n_estimators_is_refused_before_any_member_is_planned(
        small_weights, table, rng, monkeypatch) -> None:
    X, s = table(rng, 10, 20, 3)
    monkeypatch.setattr("puicl_model.estimator.ensemble.members_for",
                        lambda *a, **k: pytest.fail("members planned"))
    with pytest.raises(ValueError) as caught:
        PUICLClassifier(weights=small_weights, n_estimators=10**9).fit(X, s)
    assert str(caught.value) == "n_estimators: must be an integer from 1 to 100, got 1000000000"
    InferenceSettings(n_estimators=InferenceSettings.MAXIMUM["n_estimators"]).validate()


def test_invalid_members_are_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"'half': labeled_share must be in \(0, 1\], got 0"):
        Member("half", labeled_share=0)
    with pytest.raises(ValueError, match="must start with the classifier as configured"):
        members_for(2, (Member("power", numeric="power"), Member("base")))


def test_power_transform_removes_skew_and_maps_new_rows_alike() -> None:
    rng = np.random.default_rng(0)
    x = np.exp(rng.normal(size=(400, 1)) * 1.5)
    pre = TablePreprocessor(numeric="power")
    fitted = pre.fit_transform(x)[:, 0]
    skew = float(np.mean(fitted**3))  # standardized: the third moment is the skewness
    assert abs(skew) < 0.35 and float(np.mean(((x - x.mean()) / x.std()) ** 3)) > 2
    np.testing.assert_array_equal(pre.transform(x)[:, 0], fitted)
    assert np.all(np.diff(fitted[np.argsort(x[:, 0])]) >= 0)  # order kept
    assert np.isfinite(pre.transform(np.array([[1e12], [-1e12]]))).all()  # far outside: finite
    with pytest.raises(ValueError, match="numeric must be 'quantile', 'standard' or 'power'"):
        TablePreprocessor(numeric="log")


def test_default_member_count_follows_the_table(small_weights, table, rng) -> None:
    """n_estimators=None: the single pass on a numeric table, base + power-ordinal on a table
    with a categorical column, each bit for bit the explicit count."""
    X, s = table(rng, 30, 50, 6)
    numeric = PUICLClassifier(weights=small_weights).fit(X, s)
    assert numeric.n_estimators_ == 1 and [p.member for p in numeric.planners_] == [0]
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(6)])
    frame["colour"] = np.where(X[:, 0] > 0, "red", np.where(X[:, 1] > 0, "green", "blue"))
    mixed = PUICLClassifier(weights=small_weights).fit(frame, s)
    assert mixed.n_estimators_ == 2 and [p.member for p in mixed.planners_] == [0, 1]
    assert [v.preprocessor.categorical for v in mixed.views_] == ["onehot", "ordinal"]
    two = PUICLClassifier(weights=small_weights, n_estimators=2).fit(frame, s)
    pool = frame[s == 0]
    np.testing.assert_array_equal(mixed.predict_proba(pool), two.predict_proba(pool))
    one = PUICLClassifier(weights=small_weights, n_estimators=1).fit(frame, s)
    assert one.n_estimators_ == 1
    assert not np.allclose(one.predict_proba(pool), mixed.predict_proba(pool), atol=1e-5)
    assert members_for(None, has_categorical=True) == list(MEMBERS[:2])
    assert members_for(None, has_categorical=False) == list(MEMBERS[:1])


def test_member_that_repeats_the_configured_view_is_skipped(small_weights, table, rng,
                                                            monkeypatch) -> None:
    """Configured as the power-ordinal member already is, a second member would compute the
    same pass again: it is skipped, not run twice."""
    X, s = table(rng, 30, 50, 6)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, n_estimators=2, numeric="power",
                          categorical="ordinal").fit(X, s)
    log.stop()
    assert len(clf.views_) == 1 and clf.n_estimators_ == 1
    assert log.tasks == [(30, 80, 6)]
