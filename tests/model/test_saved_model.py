"""``PUICLClassifier.save`` / ``load``: no pickle, the same bits back, damage refused."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.saved_model import SavedModelError

pytestmark = pytest.mark.usefixtures("one_openmp_thread")


def _frame(n_labeled: int, n_pool: int, seed: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = n_labeled + n_pool
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    frame.loc[n_labeled + n_pool // 2:, ["a", "b"]] += 1.5  # half the pool negative
    frame["colour"] = rng.choice(["red", "green", "blue"], size=n)
    frame.loc[::7, "a"] = np.nan
    return frame, np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]


@pytest.mark.parametrize("partner", ["auto", "none"])
def test_a_round_trip_gives_the_same_bits(small_weights, tmp_path, partner) -> None:
    X, s = _frame(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio=partner,
                          threshold="prior").fit(X, s)
    pool, new = X[s == 0], _frame(5, 10, seed=9)[0]
    before = clf.predict_proba(pool), clf.predict_proba(new), clf.predict(new)
    report = clf.class_prior_report()
    clf.save(tmp_path / "saved")
    loaded = PUICLClassifier.load(tmp_path / "saved", device="cpu")
    after = loaded.predict_proba(pool), loaded.predict_proba(new), loaded.predict(new)
    for one, two in zip(before, after, strict=True):
        assert one.tobytes() == two.tobytes()
    assert loaded.class_prior_report() == report
    assert (loaded.choice_ is None) == (partner == "none")
    assert not list((tmp_path / "saved").rglob("*.pkl"))


def test_a_flipped_byte_in_any_file_is_refused_in_one_line(small_weights, tmp_path) -> None:
    X, s = _frame(40, 160)
    saved = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s).save(
        tmp_path / "saved")
    files = sorted(path for path in saved.rglob("*") if path.is_file())
    assert {path.relative_to(saved).as_posix() for path in files} >= {
        "manifest.json", "state.json", "arrays.safetensors", "weights/model.safetensors"}
    for path in files:
        data = path.read_bytes()
        for position in (len(data) // 2, len(data) - 2):
            damaged = bytearray(data)
            damaged[position] ^= 0x01
            path.write_bytes(bytes(damaged))
            with pytest.raises(SavedModelError) as caught:
                PUICLClassifier.load(saved, device="cpu")
            message = str(caught.value)
            assert "\n" not in message and str(path) in message, message
        path.write_bytes(data[: len(data) // 2])  # truncated
        with pytest.raises(SavedModelError, match=path.name):
            PUICLClassifier.load(saved, device="cpu")
        path.write_bytes(data)
    PUICLClassifier.load(saved, device="cpu")  # intact again


@pytest.mark.parametrize("blend", ["bagged", "model+bagged"])
def test_a_blend_that_weighs_the_bagged_trees_gives_the_same_bits(small_weights, tmp_path,
                                                                     blend) -> None:
    import dataclasses

    from puicl_model.estimator.portfolio import CANDIDATES, Blend, log_odds

    X, s = _frame(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    portfolio = clf.portfolio_
    # as where the evidence chose it: the blend of ``blend`` on the pool's scores
    portfolio.choice = dataclasses.replace(portfolio.choice, name=blend,
                                           weights=dict(CANDIDATES[blend]))
    model = clf.fitted_.model_scores(np.arange(len(clf.x_pool_)), clf._runtime())
    pool = {"model": log_odds(model),
            **portfolio.pool_scores}
    portfolio.blend = Blend.on_pool(portfolio.choice.weights, pool, clf.fitted_.pool_proba)
    new = _frame(5, 10, seed=9)[0]
    before = clf.predict_proba(new)
    loaded = PUICLClassifier.load(clf.save(tmp_path / "saved"), device="cpu")
    assert type(loaded.portfolio_.learners["bagged"].models_[0]).__name__ == "ForestTrees"
    assert loaded.predict_proba(new).tobytes() == before.tobytes()


def test_save_replaces_an_earlier_save_and_refuses_other_folders(small_weights, tmp_path) -> None:
    X, s = _frame(30, 120)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)
    clf.save(tmp_path / "saved")
    clf.save(tmp_path / "saved")  # over the first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]  # no temporary left
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(SavedModelError, match="is not a saved PUICL classifier"):
        clf.save(tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_predict_saves_the_model_and_scores_with_it(small_weights, tmp_path, capsys) -> None:
    from puicl_model.files.cli import main

    X, s = _frame(30, 120)
    X.assign(s=s).to_csv(tmp_path / "table.csv", index=False)
    saved = tmp_path / "model"
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "fitted.csv"),
                 "--save-model", str(saved), "--no-progress"]) == 0
    assert f"saved the fitted classifier to {saved}" in capsys.readouterr().err
    # the same table, its label column dropped: the pool rows get their fitted scores back
    assert main(["predict", "--model", str(saved), "--input", str(tmp_path / "table.csv"),
                 "--drop-columns", "s", "-o", str(tmp_path / "again.csv")]) == 0
    fitted, again = (pd.read_csv(tmp_path / name) for name in ("fitted.csv", "again.csv"))
    pool = again.set_index("row").loc[fitted["row"]]
    assert (pool["p_positive"].to_numpy() == fitted["p_positive"].to_numpy()).all()
    new = _frame(4, 6, seed=11)[0]
    new.to_csv(tmp_path / "new.csv", index=False)
    assert main(["predict", "--model", str(saved), "--input", str(tmp_path / "new.csv"),
                 "-o", str(tmp_path / "new_scores.csv")]) == 0
    expected = PUICLClassifier.load(saved, device="cpu").predict_proba(
        pd.read_csv(tmp_path / "new.csv"))[:, 1]
    assert (pd.read_csv(tmp_path / "new_scores.csv")["p_positive"].to_numpy() == expected).all()
    capsys.readouterr()
    assert main(["predict", "--model", str(saved), "--input", str(tmp_path / "new.csv"),
                 "--label-column", "s"]) == 2
    assert "--model takes no --label-column" in capsys.readouterr().err


def test_a_generator_seed_is_saved_as_the_fits_root_seed(small_weights, tmp_path) -> None:
    X, s = _frame(30, 120)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                          random_state=np.random.default_rng(3)).fit(X, s)
    loaded = PUICLClassifier.load(clf.save(tmp_path / "saved"), device="cpu")
    assert loaded.random_state == clf.fitted_.entropy
    assert loaded.predict_proba(X).tobytes() == clf.predict_proba(X).tobytes()


# ------------------------------------------------------------------ without the training data
@pytest.mark.parametrize("partner", ["auto", "none"])
def test_a_round_trip_without_training_data_scores_new_rows_the_same(small_weights, tmp_path,
                                                                     partner) -> None:
    from safetensors.numpy import load_file

    X, s = _frame(40, 160)
    # chunks of 40 pool rows and two members: several contexts per member
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio=partner, n_estimators=2,
                          single_pass_limit=40, chunk_size=40, threshold="prior").fit(X, s)
    new = _frame(5, 30, seed=9)[0]
    before = clf.predict_proba(new), clf.predict(new)
    saved = clf.save(tmp_path / "saved", training_data=False)
    loaded = PUICLClassifier.load(saved, device="cpu")
    after = loaded.predict_proba(new), loaded.predict(new)
    for one, two in zip(before, after, strict=True):
        assert one.tobytes() == two.tobytes()
    # one row at a time, as any batch: the same bytes; and a copy sent to another process
    # (dask's workers) carries the caches
    assert loaded.predict_proba(new.iloc[3:4]).tobytes() == before[0][3:4].tobytes()
    copy = pickle.loads(pickle.dumps(loaded))
    assert copy.predict_proba(new).tobytes() == before[0].tobytes()
    assert loaded.estimate_class_prior() == clf.estimate_class_prior()
    assert (loaded.choice_ is None) == (partner == "none")
    # a fitted pool row is scored as a new row: there is no pool to find it in
    pool_row = X[s == 0].iloc[:1]
    assert clf.predict_proba(pool_row).tobytes() != loaded.predict_proba(pool_row).tobytes()
    # no array of the training table: what has a value per fitted row is sorted (the columns'
    # quantile maps, the blend's pool distribution), no row's values in the rows' order
    arrays = {**load_file(str(saved / "arrays.safetensors")),
              **load_file(str(saved / "contexts.safetensors"))}
    trees = _tree_arrays(json.loads((saved / "state.json").read_text()))
    assert trees or partner == "none"  # (the learners' node arrays: no row of the table)
    for name, array in arrays.items():
        if array.ndim and array.shape[0] in {40, 160, 200} and name not in trees:
            values = array[~np.isnan(array)] if array.ndim == 1 else array
            assert values.ndim == 1 and (np.diff(values) >= 0).all(), (name, array.shape)
    assert clf.x_pool_[:2].tobytes() not in (saved / "arrays.safetensors").read_bytes()
    # the caches are the keys/values of every context: [columns, heads, rows, head_dim]
    assert any(name.endswith(".keys.0") for name in arrays)


def _tree_arrays(state: object) -> set[str]:
    """The names of the arrays that saved trees (node arrays) hold in a state.json."""
    names, stack, inside = set(), [(state, False)], {"ForestTrees", "BoostedTrees"}
    while stack:
        item, in_trees = stack.pop()
        if isinstance(item, dict):
            in_trees = in_trees or item.get("__object__") in inside
            if in_trees and "__array__" in item:
                names.add(item["__array__"])
            stack.extend((value, in_trees) for value in item.values())
        elif isinstance(item, list):
            stack.extend((value, in_trees) for value in item)
    return names


def test_a_classifier_without_training_data_refuses_what_needs_it(small_weights,
                                                                  tmp_path) -> None:
    from puicl_model.estimator.classifier import NoTrainingDataError

    X, s = _frame(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    loaded = PUICLClassifier.load(clf.save(tmp_path / "saved", training_data=False),
                                  device="cpu")
    calls = {"estimate_class_prior": lambda: loaded.estimate_class_prior(n_folds=3),
             "class_prior_report": loaded.class_prior_report,
             "plot_report": lambda: loaded.plot_report(),
             "fitted_pool_proba": loaded.fitted_pool_proba,
             "held_out_scores": loaded.held_out_scores,
             "pool_rows": lambda: loaded.predict_and_proba(X.iloc[:2], pool_rows=[0, -1]),
             "save": lambda: loaded.save(tmp_path / "again")}
    for name, call in calls.items():
        with pytest.raises(NoTrainingDataError, match="saved without") as caught:
            call()
        assert "\n" not in str(caught.value), name
    # threshold="prior" needs π̂, which was not estimated before this save
    loaded.set_params(threshold="prior")
    with pytest.raises(NoTrainingDataError, match="π̂"):
        loaded.predict(X.iloc[:2])
    # it saves again without the table, and scores the same
    loaded.set_params(threshold=0.5)
    again = PUICLClassifier.load(loaded.save(tmp_path / "again", training_data=False),
                                 device="cpu")
    assert again.predict_proba(X.iloc[:5]).tobytes() == loaded.predict_proba(X.iloc[:5]).tobytes()


def test_a_flipped_byte_without_training_data_is_refused(small_weights, tmp_path) -> None:
    X, s = _frame(40, 160)
    saved = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s).save(
        tmp_path / "saved", training_data=False)
    for name in ("contexts.safetensors", "state.json", "manifest.json"):
        path = saved / name
        data = path.read_bytes()
        damaged = bytearray(data)
        damaged[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(SavedModelError) as caught:
            PUICLClassifier.load(saved, device="cpu")
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)
        path.write_bytes(data)
    PUICLClassifier.load(saved, device="cpu")


def test_predict_saves_the_model_without_training_data(small_weights, tmp_path) -> None:
    from puicl_model.files.cli import main

    X, s = _frame(30, 120)
    X.assign(s=s).to_csv(tmp_path / "table.csv", index=False)
    _frame(4, 6, seed=11)[0].to_csv(tmp_path / "new.csv", index=False)
    scores = {}
    for name, flags in (("full", []), ("bare", ["--no-training-data"])):
        assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                     "--weights", str(small_weights), "-o", str(tmp_path / f"{name}.csv"),
                     "--save-model", str(tmp_path / name), "--no-progress", *flags]) == 0
        assert main(["predict", "--model", str(tmp_path / name), "--input",
                     str(tmp_path / "new.csv"), "-o", str(tmp_path / f"{name}_new.csv")]) == 0
        scores[name] = pd.read_csv(tmp_path / f"{name}_new.csv")
    assert scores["full"].equals(scores["bare"])
    assert not (tmp_path / "full" / "contexts.safetensors").exists()
    assert (tmp_path / "bare" / "contexts.safetensors").is_file()
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--no-training-data"]) == 2


@pytest.mark.parametrize("large_pool", ["shared", "chunks"])
def test_a_new_row_beyond_the_fitted_range_scores_the_same_without_training_data(
        small_weights, tmp_path, large_pool) -> None:
    X, s = _frame(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                          large_pool=large_pool, single_pass_limit=40, chunk_size=40).fit(X, s)
    pool = X[s == 0]
    # a fitted pool row at a column's extreme, moved beyond it: it encodes as that pool row
    lowest, highest = pool.loc[[pool["b"].idxmin()]], pool.loc[[pool["c"].idxmax()]]
    new = pd.concat([lowest.assign(b=lowest["b"] - 3.0), highest.assign(c=highest["c"] + 3.0)])
    before = clf.predict_proba(new)
    loaded = PUICLClassifier.load(clf.save(tmp_path / "saved", training_data=False),
                                  device="cpu")
    assert loaded.predict_proba(new).tobytes() == before.tobytes()
    # the fitted rows themselves keep their fitted scores in memory
    assert (clf.predict_proba(pd.concat([lowest, highest]))[:, 1]
            == clf.fitted_pool_proba()[[pool.index.get_loc(i) for i in new.index]]).all()
