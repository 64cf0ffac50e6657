"""DEDPUL (studies.dedpul), the class-prior study's alternative to the classifier's rule, on
synthetic score mixtures of known π: where the positives' and negatives' scores barely overlap
it recovers π, where they overlap everywhere it falls short, as BBE does."""

from __future__ import annotations

import numpy as np
import pytest

from puicl_model.estimator.prior import best_bin_alpha
from studies.dedpul import dedpul_alpha, dedpul_estimate, density_ratio
from tests.score_mixtures import IDENTICAL, OVERLAPPING, SEPARATED, errors, mixture


@pytest.mark.parametrize("pi", [0.2, 0.5, 0.8])
def test_separated_scores_give_pi_within_three_points(pi: float) -> None:
    # 10 draws: the median miss is at most 0.02 (measured), the mean at most 0.044 (at
    # π = 0.2, where 2 of the 10 draws overshoot by 0.13 and 0.29: the top bin's few rows)
    miss = errors(dedpul_alpha, pi, SEPARATED, seeds=range(10))
    assert np.median(np.abs(miss)) < 0.03
    assert abs(miss.mean()) < 0.05


def test_overlapping_scores_fall_short_of_pi_and_more_so_the_more_they_overlap() -> None:
    for pi in (0.5, 0.8):
        separated = errors(dedpul_alpha, pi, SEPARATED).mean()
        overlapping = errors(dedpul_alpha, pi, OVERLAPPING).mean()
        identical = errors(dedpul_alpha, pi, IDENTICAL).mean()
        assert overlapping < -0.05 and overlapping < separated - 0.05
        assert identical == pytest.approx(-pi, abs=0.06)
        # as BBE: both bound the positive share from above
        bbe = errors(best_bin_alpha, pi, OVERLAPPING).mean()
        assert bbe < -0.05


def test_density_ratio_is_monotone_and_near_one_over_alpha_where_positives_alone_score(
) -> None:
    held, pool = mixture(0.5, SEPARATED, seed=0)
    ratio = density_ratio(held, pool)
    order = np.argsort(pool)
    assert (np.diff(ratio[order]) >= -1e-12).all()
    assert ratio[order][-100:].mean() == pytest.approx(2.0, rel=0.15)  # 1/α with α = 0.5
    assert ratio[order][:100].mean() < 0.05  # where the negatives score


def test_tolerance_trades_alpha_up_and_the_estimate_averages_the_folds() -> None:
    held, pool = mixture(0.5, OVERLAPPING, seed=1)
    assert dedpul_alpha(held, pool, 0.001) <= dedpul_alpha(held, pool, 0.05)
    with pytest.raises(ValueError, match="at least two positive"):
        dedpul_alpha([0.5], [0.1, 0.2])
    folds = [mixture(0.5, SEPARATED, seed) for seed in (0, 1)]
    assert dedpul_estimate(folds) == pytest.approx(
        np.mean([1 - dedpul_alpha(h, p) for h, p in folds]))
