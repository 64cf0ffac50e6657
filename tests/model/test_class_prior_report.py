"""π as far as the data identify it (``class_prior_report``): the identified lower bound, the
point's bootstrap interval from the kept scores, and the flag (``puicl predict``'s report:
test_cli_prior_report.py)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.prior import best_bin_alpha, class_prior_estimate
from puicl_model.estimator.prior_report import (
    ClassPriorReport,
    _weighted_best_bin,
    bootstrap_estimates,
    negative_share_bound,
    prior_report,
)


def score_folds(rng: np.random.Generator, pi: float, positive_law, negative_law,
                n_held: int = 1000, n_pool: int = 2000) -> tuple[np.ndarray, list]:
    """Two folds of (held-out positives' scores, the pool's scores) for a pool whose negative
    share is ``pi``; the pool's own scores are the first fold's pool (one score function)."""
    n_neg = round(pi * n_pool)
    pool = np.concatenate([positive_law(rng, n_pool - n_neg), negative_law(rng, n_neg)])
    folds = [(positive_law(rng, n_held // 2), pool + rng.normal(0, 1e-3, n_pool))
             for _ in range(2)]
    return pool, folds


def high(rng, n):  # positives alone score above 0.6
    return rng.uniform(0.6, 1.0, n)


def low(rng, n):
    return rng.uniform(0.0, 0.4, n)


@pytest.mark.parametrize("pi", [0.2, 0.5, 0.8])
def test_bound_recovers_pi_where_the_classes_separate(pi: float) -> None:
    pool, folds = score_folds(np.random.default_rng(0), pi, high, low)
    bound = negative_share_bound(folds, len(pool))
    assert pi - 0.1 <= bound <= pi  # the DKW margins keep it below, and only just


def test_bound_is_monotone_in_delta_and_near_zero_without_separation() -> None:
    pool, folds = score_folds(np.random.default_rng(1), 0.5, high, low)
    bounds = [negative_share_bound(folds, len(pool), delta) for delta in (0.001, 0.025, 0.2)]
    assert bounds[0] < bounds[1] < bounds[2]  # a smaller failure probability, a lower bound
    same = np.random.default_rng(2)
    pool, folds = score_folds(same, 0.5, lambda r, n: r.random(n), lambda r, n: r.random(n))
    assert negative_share_bound(folds, len(pool)) < 0.05  # nothing tells the classes apart


def test_bound_holds_where_the_classes_overlap() -> None:
    # Beta(3, 2) positives against Beta(2, 3) negatives: π is not identified, the bound must
    # stay below it in nearly every draw (at δ = 0.025 per sample: >= 95 %)
    def positive(r, n):
        return r.beta(3, 2, n)

    def negative(r, n):
        return r.beta(2, 3, n)

    held = [negative_share_bound(score_folds(np.random.default_rng(seed), 0.5, positive,
                                             negative, n_held=200, n_pool=800)[1], 800)
            for seed in range(40)]
    assert np.mean(np.asarray(held) <= 0.5) >= 0.95
    assert np.mean(held) > 0.05  # and it is not vacuous


def test_vectorized_best_bin_matches_the_estimator_with_unit_weights() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):  # rounded scores: ties on both sides
        held = np.round(rng.beta(4, 2, 150), 2)
        pool = np.round(np.concatenate([rng.beta(4, 2, 300), rng.beta(2, 4, 400)]), 2)
        alpha = _weighted_best_bin(held, pool, np.ones((1, len(held))), np.ones((1, len(pool))))
        assert alpha[0] == pytest.approx(best_bin_alpha(held, pool))


def test_report_fields_are_consistent_and_seeded() -> None:
    pool, folds = score_folds(np.random.default_rng(4), 0.5, lambda r, n: r.beta(3, 2, n),
                              lambda r, n: r.beta(2, 3, n), n_held=200, n_pool=800)
    report = prior_report(pool, folds, entropy=7)
    assert report.estimate == class_prior_estimate(pool, folds)
    low_end, high_end = report.interval
    assert low_end <= report.estimate <= high_end <= report.upper <= 1.0
    assert 0.0 <= report.lower_bound <= report.upper
    assert report.upper == pytest.approx(min(1.0, high_end + report.allowance))
    assert report == prior_report(pool, folds, entropy=7)
    assert report.interval != prior_report(pool, folds, entropy=8).interval
    assert json.loads(json.dumps(report.to_dict()))["interval"] == list(report.interval)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.estimate = 0.1  # type: ignore[misc]


def test_report_flags_poor_identification_and_explains_the_threshold() -> None:
    rng = np.random.default_rng(5)
    overlap, folds = score_folds(rng, 0.5, lambda r, n: r.beta(3, 2, n),
                                 lambda r, n: r.beta(2, 3, n), n_held=200, n_pool=800)
    poor = prior_report(overlap, folds, entropy=0)
    assert poor.poorly_identified and "keep the 0.5 cut" in poor.note
    separated, folds = score_folds(rng, 0.5, high, low)
    good = prior_report(separated, folds, entropy=0)
    assert not good.poorly_identified and "\n" not in good.note
    gap = good.estimate - good.lower_bound
    assert good.note == (f"π is identified: π̂ = {good.estimate:.2f} lies {gap:.2f} above the "
                         f"identified lower bound {good.lower_bound:.2f}; threshold='prior' "
                         "labels that share of the pool negative")
    unbounded = prior_report(separated, None, entropy=0)  # too few labeled positives
    assert unbounded.lower_bound is None and unbounded.poorly_identified
    assert unbounded.estimate == pytest.approx(np.mean(1.0 - separated))


def test_bootstrap_resamples_the_rows_not_the_scores() -> None:
    pool = np.r_[np.zeros(50), np.ones(50)]  # π̂ = mean P(y=0) = 0.5 exactly
    replicates = bootstrap_estimates(pool, None, entropy=0, n_bootstrap=500)
    np.testing.assert_allclose(replicates * 100, np.round(replicates * 100), atol=1e-9)
    assert 0.03 < replicates.std() < 0.07  # binomial: sqrt(0.25 / 100) = 0.05


@pytest.mark.parametrize(("options", "message"), [
    ({"level": 1.0}, r"level must be in \(0, 1\), got 1.0"),
    ({"n_bootstrap": 5}, "n_bootstrap must be an integer >= 10, got 5"),
    ({"n_bootstrap": 100.0}, "n_bootstrap must be an integer >= 10, got 100.0"),
    ({"delta": 0.5}, r"delta must be in \(0, 0.5\), got 0.5"),
])
def test_bad_options_get_one_line_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        prior_report(np.full(10, 0.5), None, entropy=0, **options)
    assert "\n" not in str(caught.value)


def test_classifier_report_reuses_the_prior_scores(small_weights, monkeypatch) -> None:
    from puicl_model.estimator import prior

    rng = np.random.default_rng(6)
    X = rng.normal(size=(120, 4))
    s = np.r_[np.ones(40, dtype=int), np.zeros(80, dtype=int)]
    calls = []
    real = prior.cross_fitted_scores
    monkeypatch.setattr("puicl_model.estimator.fitted_table.cross_fitted_scores",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    pi_hat = clf.estimate_class_prior()
    report = clf.class_prior_report()
    assert len(calls) == 1  # the report read the folds estimate_class_prior scored
    assert report.estimate == pi_hat and report.lower_bound is not None
    again = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    assert again.class_prior_report() == report  # seeded by random_state
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        clf.class_prior_report(n_folds=1)


def test_report_reads_the_portfolios_held_out_positives_at_no_extra_pass(small_weights,
                                                                         monkeypatch) -> None:
    from puicl_model.estimator.portfolio import MIN_LABELED_FOR_HOLD_OUT

    rng = np.random.default_rng(8)
    n_labeled = MIN_LABELED_FOR_HOLD_OUT + 20
    X = rng.normal(size=(n_labeled + 500, 3))
    X[: n_labeled + 250] += 1.0  # the labeled positives, then 250 pool positives
    s = np.r_[np.ones(n_labeled, dtype=int), np.zeros(500, dtype=int)]
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    assert clf.n_held_out_ > 0 and clf.portfolio_ is not None
    def no_cross_fitting(*args, **kwargs):
        raise AssertionError("the held-out positives were scored with the pool already")

    monkeypatch.setattr("puicl_model.estimator.fitted_table.cross_fitted_scores", no_cross_fitting)
    report = clf.class_prior_report()
    assert report.estimate == clf.estimate_class_prior() and report.lower_bound is not None
    assert report.lower_bound <= report.upper


def _report_without_signal(held: np.ndarray, pool: np.ndarray):
    return prior_report(pool, [(held, pool), (held, pool)], entropy=0)


@pytest.mark.parametrize("case", ["all-tied", "same-law", "one-pool-row"])
def test_a_ranking_without_signal_and_a_zero_bound_is_not_identified(case: str) -> None:
    """A bound of 0 with a small π̂ is no identification: where the held-out positives are
    told from the pool no better than chance, π is not identified and may be anything."""
    rng = np.random.default_rng(11)
    if case == "all-tied":  # constant features, all rows equal: one score for every row
        held, pool = np.full(40, 0.9), np.full(160, 0.9)
    elif case == "same-law":  # noise columns: positives and pool scored alike
        held, pool = rng.uniform(0.85, 0.95, 40), rng.uniform(0.85, 0.95, 160)
    else:  # one unlabeled row
        held, pool = rng.uniform(0.85, 0.95, 40), np.array([0.9])
    report = _report_without_signal(held, pool)
    assert report.estimate < 0.2 and report.lower_bound < 0.05  # what passed as identified
    assert report.status == "not identified" and report.poorly_identified
    assert report.note.startswith("π is not identified: the scores tell held-out labeled "
                                  "positives from the pool no better than chance (AUC ")
    assert "keep the 0.5 cut" in report.note and "\n" not in report.note
    assert report.upper == 1.0  # π may lie anywhere the bound allows
    assert 0.4 < report.held_out_auc < 0.7


def test_statuses_of_identified_and_overlapping_scores() -> None:
    rng = np.random.default_rng(5)
    separated, folds = score_folds(rng, 0.5, high, low)
    good = prior_report(separated, folds, entropy=0)
    assert good.status == "identified" and good.held_out_auc > 0.7
    overlap, folds = score_folds(rng, 0.5, lambda r, n: r.beta(3, 2, n),
                                 lambda r, n: r.beta(2, 3, n), n_held=200, n_pool=800)
    assert prior_report(overlap, folds, entropy=0).status == "poorly identified"
    unbounded = prior_report(separated, None, entropy=0)
    assert unbounded.status == "not bounded" and unbounded.held_out_auc is None


def _tables_without_signal() -> dict[str, tuple[object, np.ndarray]]:
    import pandas as pd

    rng = np.random.default_rng(0)
    n_labeled, n_pool = 24, 72
    n = n_labeled + n_pool
    s = np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]
    return {
        "constant-features": (pd.DataFrame({"a": np.full(n, 3.0), "b": np.full(n, -1.0)}), s),
        "all-rows-equal": (pd.DataFrame({"a": np.full(n, 1.0), "c": ["x"] * n}), s),
        "two-distinct-rows": (pd.DataFrame({"a": np.tile([0.0, 1.0], n // 2),
                                            "b": np.tile([5.0, -5.0], n // 2)}), s),
        "one-unlabeled-row": (pd.DataFrame({"a": rng.normal(size=n_labeled + 1)}),
                              np.r_[np.ones(n_labeled, dtype=int), 0]),
        "300-random-categorical-columns": (
            pd.DataFrame({f"c{j}": rng.choice(list("abc"), n) for j in range(300)}), s),
    }


@pytest.mark.parametrize("name", list(_tables_without_signal()))
def test_tables_without_signal_are_reported_not_identified(small_weights, name: str) -> None:
    import warnings

    X, s = _tables_without_signal()[name]
    with warnings.catch_warnings():  # constant and identifier-like columns are warned about
        warnings.simplefilter("ignore")
        classifier = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                                     random_state=0).fit(X, s)
        report = classifier.class_prior_report(n_bootstrap=50)
    assert report.status == "not identified", (name, report)
    assert report.note.startswith("π is not identified") and report.upper == 1.0


def test_a_cut_the_data_contradict_is_said_in_one_line() -> None:
    from puicl_model.estimator.prior_report import SHARE_SLACK, threshold_note

    pool = np.r_[np.full(80, 0.9), np.full(20, 0.1)]  # the cut labels 20 % negative
    agreeing = _report(0.2, "identified", bound=0.15, upper=0.28)
    assert threshold_note(pool, 0.5, 0.2 + SHARE_SLACK - 0.01, agreeing) is None
    note = threshold_note(pool, 0.5, bound=0.45)
    assert note is not None and "20%" in note and "at least 45%" in note
    # a bound the cut respects contradicts nothing: what is said is the last check's line
    respected = threshold_note(pool, 0.5, bound=0.2 + SHARE_SLACK - 0.01)
    assert respected is not None and "at least" not in respected


def _report(estimate: float, status: str, bound: float | None = 0.1,
            upper: float = 0.8) -> ClassPriorReport:
    return ClassPriorReport(lower_bound=bound, estimate=estimate, interval=(estimate, estimate),
                            upper=upper, allowance=0.1, level=0.9, n_bootstrap=1, delta=0.05,
                            poorly_identified=status != "identified", note="", status=status,
                            held_out_auc=None)


def test_a_cut_that_agrees_with_everything_but_an_unidentified_pi_is_said_unplaced() -> None:
    """The cut, π̂ and the probabilities' mean all agree (20 % negative), but the data leave π
    anywhere from the bound to the upper end: the share is said to be unplaced, by how far.
    Where π is identified, or its range stays within the slack of the cut, nothing is said."""
    from puicl_model.estimator.prior_report import (
        MODEL_ERROR_ALLOWANCE,
        SHARE_SLACK,
        threshold_note,
    )

    pool = np.r_[np.full(80, 0.9), np.full(20, 0.1)]  # cut: 20 % negative; mean P(y=0) 0.26
    note = threshold_note(pool, 0.5, 0.1, _report(0.25, "poorly identified"))
    assert note is not None and "poorly identified" in note
    assert "between 10% and 80%" in note and "off by up to 60%" in note
    assert threshold_note(pool, 0.5, 0.1, _report(0.25, "identified")) is None
    narrow = _report(0.25, "poorly identified", bound=0.2 - SHARE_SLACK + 0.01,
                     upper=0.2 + SHARE_SLACK - 0.01)
    assert threshold_note(pool, 0.5, narrow.lower_bound, narrow) is None
    unbounded = threshold_note(pool, 0.5, None, _report(0.25, "not bounded", bound=None))
    assert unbounded is not None and "between 0% and 80%" in unbounded
    # nothing read at fit: the range runs from the learners' bound to the probabilities' mean
    # plus the model's allowance for error
    alone = threshold_note(pool, 0.5, 0.15)
    upper = round(100 * (0.26 + MODEL_ERROR_ALLOWANCE))
    assert alone is not None and "not identified by what fit read" in alone
    assert f"between 15% and {upper}%" in alone


def test_probabilities_that_crowd_the_cut_are_said_even_where_nothing_bounds_pi() -> None:
    """Scores all between 0.43 and 0.70 (a wide table's): the 0.5 cut labels about a tenth of
    the pool negative while the probabilities expect 40 %: said with no bound and no
    report. Spread scores whose cut agrees with their mean say nothing."""
    from puicl_model.estimator.prior_report import SHARE_SLACK, threshold_note

    crowded = np.r_[np.full(10, 0.45), np.full(90, 0.62)]  # cut: 10 % negative; mean P(y=0) 0.40
    note = threshold_note(crowded, 0.5, bound=None)
    assert note is not None and "10%" in note and "expect 40%" in note
    assert "threshold='prior'" in note
    assert threshold_note(crowded, 0.5, bound=0.0) == note  # a bound the cut respects
    assert threshold_note(crowded, 0.44, bound=None) is not None  # 0 % negative, 40 % expected
    spread = np.r_[np.full(80, 0.95), np.full(20, 0.10)]  # cut: 20 % negative; expected 22 %
    assert threshold_note(spread, 0.5, None, _report(0.22, "identified", 0.2, 0.3)) is None
    assert "crowd" not in threshold_note(spread, 0.5, bound=None)  # the last check's line
    # just past the slack: the expected share SHARE_SLACK + 0.01 above the cut's 20 %
    past = np.r_[np.full(80, 1.0 - (SHARE_SLACK + 0.01) / 0.8), np.full(20, 0.0)]
    assert threshold_note(past, 0.5, bound=None) is not None


def test_a_cut_far_from_a_poorly_identified_estimate_says_the_labels_cannot_be_placed() -> None:
    from puicl_model.estimator.prior_report import SHARE_SLACK, threshold_note

    pool = np.r_[np.full(80, 0.9), np.full(20, 0.1)]  # the cut labels 20 % negative

    near = threshold_note(pool, 0.5, 0.1, _report(0.2 + SHARE_SLACK - 0.01,
                                                  "poorly identified"))
    assert near is not None and "neither can place" not in near  # the last check's line
    note = threshold_note(pool, 0.5, 0.1, _report(0.45, "poorly identified"))
    assert note is not None and "π̂ is 45%" in note and "between 10% and 80%" in note
    assert "neither can place the labels" in note
    identified = threshold_note(pool, 0.5, 0.1, _report(0.45, "identified"))
    assert identified is not None and "π is identified at 45%" in identified


def test_predict_warns_once_where_its_cut_contradicts_the_data(small_weights, rng) -> None:
    """A fit whose pool probabilities all lie above the cut, on a table whose learners
    identify a large negative share: predict says so once, in one line; threshold="prior"
    cuts at π̂ and says nothing."""
    import warnings

    from puicl_model.estimator.prior_report import ThresholdWarning

    X = rng.normal(size=(700, 4))
    X[:400, 0] += 3.0  # 200 labeled positives, 200 pool positives, 300 pool negatives
    s = np.zeros(700, dtype=int)
    s[:200] = 1
    clf = PUICLClassifier(weights=small_weights, random_state=0, n_threads=1).fit(X, s)
    pool = X[s == 0]
    clf.fitted_.pool_proba = np.clip(clf.fitted_.pool_proba, 0.6, 1.0)  # every row positive
    with pytest.warns(ThresholdWarning, match=r"labels 0% of the fitted pool negative.*at "
                                              r"least \d+%"):
        clf.predict(pool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict(pool)  # once per fit and threshold
        clf.set_params(threshold="prior").predict(pool)
