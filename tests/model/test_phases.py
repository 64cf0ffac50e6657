"""Long work names its phase, and ``puicl predict``'s bar over the pool's rows moves while a
batch is scored (puicl_model.passes.phases)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puicl_model import PUICLClassifier
from puicl_model.estimator.fitted_table import FittedTable
from puicl_model.estimator.prior import cross_fitted_scores
from puicl_model.files import large_tables
from puicl_model.files.cli import main
from puicl_model.passes.phases import describe, phase, report


def test_a_phase_is_named_and_hears_how_far_it_is() -> None:
    heard: list[float] = []
    assert describe("PUICL") == "PUICL"
    with phase("outer", heard.append):
        report(1, 4)
        with phase("inner"):  # the innermost phase is the one named and told
            assert describe("PUICL") == "inner"
            report(1, 2)
        report(4, 4)
        assert describe("PUICL") == "outer"
    assert heard == [0.25, 1.0] and describe("PUICL") == "PUICL"


class RecordingBar:
    """Stands in for ``puicl predict``'s tqdm bar over the pool's rows."""

    def __init__(self) -> None:
        self.updates: list[int] = []
        self.descriptions: list[str] = []

    def __enter__(self) -> RecordingBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, count: int) -> None:
        self.updates.append(count)

    def set_description_str(self, text: str, refresh: bool = True) -> None:
        self.descriptions.append(text)


def test_puicl_predict_names_its_phases_and_its_bar_moves_within_a_batch(
        table, rng, small_weights, tmp_path, monkeypatch) -> None:
    X, s = table(rng, 25, 300, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["s"] = s
    frame.to_csv(tmp_path / "t.csv", index=False)
    bar = RecordingBar()
    monkeypatch.setattr(large_tables, "pool_progress", lambda *args, **kwargs: bar)
    prepared = []  # the phase the fitted pool is scored in (by fit)
    original = FittedTable.score
    monkeypatch.setattr(FittedTable, "score",
                        lambda self, runtime: prepared.append(describe("")) or original(self,
                                                                                     runtime))
    assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "o.csv"),
                 "--pool-sample", "120", "--single-pass-limit", "60", "--chunk-size", "40",
                 "--batch-rows", "200",
                 "--no-progress"]) == 0
    assert prepared[0] == "fitting on a 120-row sample of the 300 unlabeled rows"
    # the file's 325 rows in two batches of file rows, holding the pool's 300 rows
    n_first = int((s[:200] == 0).sum())
    assert bar.descriptions == [
        f"puicl predict: scoring batch 1 (pool rows 1-{n_first} of 300)",
        f"puicl predict: scoring batch 2 (pool rows {n_first + 1}-300 of 300)",
    ]
    assert sum(bar.updates) == 300
    assert len(bar.updates) > 2  # moved within the batches, as their contexts were scored
    assert all(count > 0 for count in bar.updates)


def test_the_class_priors_folds_are_named(table, rng, small_weights) -> None:
    X, s = table(rng, 40, 100, 3)
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    named = []

    def score(planners, views):
        named.append(describe(""))
        return clf.scorer_(planners, views)

    folds = cross_fitted_scores(score, clf.planners_, clf.views_, 2)
    assert named == ["estimating π: fold 1 of 2", "estimating π: fold 2 of 2"]
    assert len(folds) == 2 and all(np.all((p >= 0) & (p <= 1)) for p, _ in folds)


def test_the_inner_bars_say_what_they_score(table, rng, small_weights, monkeypatch) -> None:
    import tqdm.auto

    named = []
    real = tqdm.auto.tqdm

    def recording(*args, **kwargs):
        named.append(kwargs["desc"])
        return real(*args, **{**kwargs, "disable": True})

    monkeypatch.setattr(tqdm.auto, "tqdm", recording)
    X, s = table(rng, 20, 60, 3)
    clf = PUICLClassifier(weights=small_weights, progress=True).fit(X, s)
    clf.predict_proba(X[s == 0])
    clf.predict_proba(X[s == 0][:5] + 0.5)
    with phase("scoring batch 1"):
        clf.predict_proba(X[s == 0][:3] - 0.5)
    assert named == ["PUICL: scoring the fitted pool", "PUICL: scoring 5 new rows",
                     "scoring batch 1"]


def test_puicl_predict_hands_its_progress_setting_down(
        table, rng, small_weights, tmp_path, monkeypatch, capsys) -> None:
    import sys

    X, s = table(rng, 25, 300, 3)
    pd.DataFrame(X, columns=["a", "b", "c"]).assign(s=s).to_parquet(tmp_path / "t.parquet")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    progress = []  # the classifier's progress wherever a row is scored
    original = PUICLClassifier.predict_and_proba
    monkeypatch.setattr(PUICLClassifier, "predict_and_proba", lambda self, X, pool_rows=None: (
        progress.append(self.progress) or original(self, X, pool_rows)))
    args = ["predict", "--input", str(tmp_path / "t.parquet"), "--label-column", "s",
            "--weights", str(small_weights), "--pool-sample", "120", "--batch-rows", "100",
            "-o", str(tmp_path / "o.parquet")]
    assert main([*args, "--save-model", str(tmp_path / "saved")]) == 0
    assert set(progress) == {None}  # the rule's own: bars on this terminal
    assert "/300 [" in capsys.readouterr().err  # the bar over the pool's 300 rows
    # the saved classifier does not carry this terminal's decision
    assert PUICLClassifier.load(tmp_path / "saved").progress is None
    progress.clear()
    assert main([*args, "--no-progress"]) == 0
    assert set(progress) == {False}
    assert "/300 [" not in capsys.readouterr().err
    # a saved classifier scores with this command's setting
    progress.clear()
    assert main(["predict", "--input", str(tmp_path / "t.parquet"), "--model",
                 str(tmp_path / "saved"), "--drop-columns", "s", "--no-progress", "-o",
                 str(tmp_path / "m.csv")]) == 0
    assert set(progress) == {False}


def test_a_loop_opens_no_bar_of_its_own_inside_a_phase_whose_bar_hears_it(
        table, rng, small_weights, monkeypatch) -> None:
    import tqdm.auto

    opened = []
    real = tqdm.auto.tqdm

    def recording(*args, **kwargs):
        opened.append((kwargs["desc"], not kwargs.get("disable", False)))
        return real(*args, **{**kwargs, "disable": True})

    monkeypatch.setattr(tqdm.auto, "tqdm", recording)
    X, s = table(rng, 20, 60, 3)
    clf = PUICLClassifier(weights=small_weights, progress=True).fit(X, s)
    heard: list[float] = []
    opened.clear()
    with phase("scoring batch 1", heard.append):  # puicl predict's bar hears the batch
        clf.predict_proba(X[s == 0][:3] - 0.5)
    assert heard and heard[-1] == 1.0  # the phase's bar moved ...
    assert opened and all(not shown for _, shown in opened)  # ... and no other bar showed
    with phase("scoring batch 2"):  # a phase no bar hears: the loop's own bar, forced
        clf.predict_proba(X[s == 0][:3] - 0.25)
    assert opened[-1] == ("scoring batch 2", True)
