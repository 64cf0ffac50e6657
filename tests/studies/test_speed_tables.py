"""The tables the speed scripts time (speed/mixed_table.py, speed/cost_model.py): what a
figure in docs/performance.md was measured on must stay what the docs say it is."""

from __future__ import annotations

import numpy as np
import pandas as pd

from speed.cost_model import table
from speed.mixed_table import mixed_table


def test_the_new_users_table_is_mixed_and_labeled_at_random() -> None:
    X, s, y = mixed_table(3000, 120, seed=1)
    assert X.shape == (3000, 13) and s.sum() == 120
    assert (y[s == 1] == 1).all()  # labeled rows are positives
    assert 0.3 < (y[s == 0] == 0).mean() < 0.7  # a pool of about half negatives
    assert X["customer_id"].is_unique
    assert pd.api.types.is_datetime64_any_dtype(X["joined"])
    assert X["x2"].isna().any() and X["city"].dtype != float
    # the draw is keyed by the seed alone
    again = mixed_table(3000, 120, seed=1)
    assert X.equals(again[0]) and np.array_equal(s, again[1])
    assert not X.equals(mixed_table(3000, 120, seed=2)[0])


def test_the_cost_models_tables_label_a_share_of_their_rows() -> None:
    x, s = table(1000, 7, 0.1)
    assert x.shape == (1000, 7) and s.sum() == 100 and (s[:100] == 1).all()
    assert table(100, 3, 0.1)[1].sum() == 20  # at least what the portfolio needs


def test_settings_timed_in_turn_take_each_place_in_a_round() -> None:
    """speed.bench_model.alternate starts each round one setting later, so that no setting
    always runs first after another kind of work; every setting is timed once a round."""
    from speed.bench_model import alternate

    calls: list[str] = []
    names = ["a", "b", "c"]
    medians = alternate({name: (lambda name=name: calls.append(name)) for name in names}, 4)
    assert calls[:3] == names  # the warm-up, in order
    rounds = [calls[3 + 3 * r: 6 + 3 * r] for r in range(4)]
    assert [r[0] for r in rounds] == ["a", "b", "c", "a"]
    assert all(sorted(r) == names for r in rounds)
    assert sorted(medians) == names and all(value >= 0 for value in medians.values())
