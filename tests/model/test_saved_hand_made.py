"""Saved folders made by hand, their checksums recomputed as anyone can: whatever their files
declare, ``load`` refuses them in one line of ``SavedModelError`` before building anything (no
traceback, no allocation of what a header declares, no tree walked forever)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import load_file, save_file

from puicl_model import PUICLClassifier
from puicl_model.estimator.saved_folder import manifest_for
from puicl_model.estimator.saved_model import SavedModelError

pytestmark = pytest.mark.usefixtures("one_openmp_thread")


def _frame(seed: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(160, 3)), columns=["a", "b", "c"])
    frame.loc[100:, ["a", "b"]] += 1.5
    return frame, np.r_[np.ones(40, dtype=int), np.zeros(120, dtype=int)]


@pytest.fixture(scope="module")
def originals(small_weights, tmp_path_factory) -> dict[str, Path]:
    """A folder with its table whose blend weighs the bagged trees, the same fit saved with
    its fallback blend (the logistic learner too), and one without its table (contexts'
    caches), saved once for the module."""
    from puicl_model.estimator.portfolio import CANDIDATES, Blend, log_odds

    X, s = _frame()
    clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    root = tmp_path_factory.mktemp("originals")
    fallback = clf.save(root / "fallback")  # the fallback's blend: the logistic learner too
    portfolio = clf.portfolio_
    portfolio.choice = dataclasses.replace(portfolio.choice, name="model+bagged",
                                           weights=dict(CANDIDATES["model+bagged"]))
    model = clf.fitted_.model_scores(np.arange(len(clf.x_pool_)), clf._runtime())
    pool = {"model": log_odds(model),
            **portfolio.pool_scores}
    portfolio.blend = Blend.on_pool(portfolio.choice.weights, pool, clf.fitted_.pool_proba)
    bare = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                           single_pass_limit=40, chunk_size=40).fit(X, s)
    return {"table": clf.save(root / "table"), "fallback": fallback,
            "bare": bare.save(root / "bare", training_data=False)}


@pytest.fixture
def folder(originals, tmp_path) -> Callable[[str], Path]:
    return lambda kind: Path(shutil.copytree(originals[kind], tmp_path / kind))


def _remanifest(saved: Path, version: int | None = None) -> None:
    """The manifest recomputed over the files it lists, as anyone can."""
    manifest = json.loads((saved / "manifest.json").read_text())
    files = {name: hashlib.sha256((saved / name).read_bytes()).hexdigest()
             for name in manifest["files"]}
    (saved / "manifest.json").write_text(json.dumps(manifest_for(
        files, manifest["version"] if version is None else version)))


def _edit_state(saved: Path, edit: Callable[[dict], Any]) -> None:
    state = json.loads((saved / "state.json").read_text())
    edit(state)
    (saved / "state.json").write_text(json.dumps(state))
    _remanifest(saved)


def _edit_arrays(saved: Path, name: str, edit: Callable[[dict], Any]) -> None:
    arrays = dict(load_file(str(saved / name)))
    edit(arrays)
    save_file(arrays, str(saved / name))
    _remanifest(saved)


def _edit_header(saved: Path, name: str, edit: Callable[[dict], Any]) -> None:
    data = (saved / name).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    edit(header)
    text = json.dumps(header).encode()
    (saved / name).write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length:])
    _remanifest(saved)


def _objects(value: Any, name: str) -> list[dict]:
    """Every entry of state.json that builds an object of class ``name``."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if str(item.get("__object__", "")) == name:  # (its type tag)
                found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _attribute(entry: dict, attribute: str) -> dict:
    return next(value for key, value in entry["state"]["__items__"] if key == attribute)


def _array_key(saved: Path, cls: str, attribute: str) -> str:
    state = json.loads((saved / "state.json").read_text())
    return next(_attribute(entry, attribute)["__array__"] for entry in _objects(state, cls)
                if isinstance(_attribute(entry, attribute), dict)
                and "__array__" in _attribute(entry, attribute))


def _deep(saved: Path) -> None:
    state = (saved / "state.json").read_text()
    nested = "[" * 100_000 + "]" * 100_000  # (too deep for json.dumps to write)
    (saved / "state.json").write_text(state.replace('"settings": ', f'"settings": {nested}, '
                                                    '"former": ', 1))
    _remanifest(saved)


def _void_scalars(state: dict) -> None:
    items = state["settings"]["__items__"]
    items += [[f"big{n}", {"__scalar__": "|V8", "value": 10**12}] for n in range(4)]


def _renamed_class(state: dict) -> None:
    # a Choice named as Blend was once named: a former name of another class
    _objects(state, "Choice")[0]["__object__"] = "puicl_model.portfolio.Blend"


def _setting(name: str, value: Any) -> Callable[[dict], None]:
    def edit(state: dict) -> None:
        state["settings"]["__items__"].append([name, value])
    return edit


def _tree_field(attribute: str, change: Callable[[np.ndarray], np.ndarray]):
    def edit(saved: Path) -> None:
        key = _array_key(saved, "ForestTrees", attribute)
        _edit_arrays(saved, "arrays.safetensors",
                     lambda arrays: arrays.__setitem__(key, change(arrays[key])))
    return edit


def _looping(left: np.ndarray) -> np.ndarray:
    return np.zeros_like(left)  # every inner node's left child its tree's root: forever


def _planner_field(attribute: str, value: int) -> Callable[[dict], None]:
    def edit(state: dict) -> None:
        for planner in _objects(state, "PassPlanner"):
            for item in planner["state"]["__items__"]:
                if item[0] == attribute:
                    item[1] = value
    return edit


def _nan_quantiles(saved: Path) -> None:
    key = _array_key(saved, "ColumnEncoding", "quantiles")
    _edit_arrays(saved, "arrays.safetensors",
                 lambda arrays: arrays.__setitem__(key, np.full_like(arrays[key], np.nan)))


def _cache(change: Callable[[np.ndarray], np.ndarray], key: str = "c0.keys.0"):
    def edit(saved: Path) -> None:
        _edit_arrays(saved, "contexts.safetensors",
                     lambda arrays: arrays.__setitem__(key, change(arrays[key])))
    return edit


def _all_caches_float16(saved: Path) -> None:
    _edit_arrays(saved, "contexts.safetensors", lambda arrays: arrays.update(
        {name: array.astype(np.float16) for name, array in arrays.items()}))


CASES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "a pickle as arrays": ("table", lambda saved: (
        (saved / "arrays.safetensors").write_bytes(pickle.dumps({"a": np.zeros(3)})),
        _remanifest(saved))),
    "a shape of 10**12": ("table", lambda saved: _edit_header(
        saved, "arrays.safetensors",
        lambda header: header[next(k for k in header if k != "__metadata__")].update(
            shape=[10**12]))),
    "int trees as float64": ("table", _tree_field("feature", lambda a: a.astype(float))),
    "a tree that loops": ("table", _tree_field("left", _looping)),
    "a split beyond the features": ("table", _tree_field("feature", lambda a: a + 1000)),
    "leaves that hold no probability": ("table", _tree_field("share", lambda a: a + 2.0)),
    "a former class name": ("table", lambda saved: _edit_state(saved, _renamed_class)),
    "JSON 100,000 deep": ("table", _deep),
    "an unknown setting": ("table", lambda saved: _edit_state(saved, _setting("bogus", 1))),
    "a malformed setting": ("table", lambda saved: _edit_state(
        saved, _setting("threshold", "half"))),
    "a list for the settings": ("table", lambda saved: _edit_state(
        saved, lambda state: state.__setitem__("settings", [1, 2]))),
    "a list for the fitted state": ("table", lambda saved: _edit_state(
        saved, lambda state: state.__setitem__("fitted", [1, 2]))),
    "void scalars": ("table", lambda saved: _edit_state(saved, _void_scalars)),
    "NaN quantiles": ("table", _nan_quantiles),
    "a key cache one column short": ("bare", _cache(lambda a: a[:-1])),
    "caches in float16": ("bare", _all_caches_float16),
    "NaN caches": ("bare", _cache(lambda a: np.full_like(a, np.nan), "c0.values.1")),
    "version 2 relabelled 1": ("bare", lambda saved: _remanifest(saved, version=1)),
    "a planner of 10**12 pool rows": ("table", lambda saved: _edit_state(
        saved, _planner_field("n_pool", 10**12))),
    "a planner of chunks of 0 rows": ("bare", lambda saved: _edit_state(
        saved, _planner_field("chunk_size", 0))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hand_made_folder_is_refused_in_one_line(folder, case) -> None:
    kind, make = CASES[case]
    saved = folder(kind)
    PUICLClassifier.load(saved, device="cpu")  # intact before
    make(saved)
    with pytest.raises(SavedModelError) as caught:
        PUICLClassifier.load(saved, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and str(saved) in message and len(message) < 600, message


def test_predict_refuses_a_hand_made_folder_in_one_line(folder, tmp_path, capsys) -> None:
    from puicl_model.files.cli import main

    saved = folder("table")
    CASES["a tree that loops"][1](saved)
    _frame()[0].to_csv(tmp_path / "rows.csv", index=False)
    assert main(["predict", "--model", str(saved), "--input", str(tmp_path / "rows.csv"),
                 "-o", str(tmp_path / "scores.csv")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: ") and error.count("\n") == 1, error
    assert "back up it" in error and not (tmp_path / "scores.csv").exists()


def test_a_folder_saved_before_a_defaulted_field_existed_still_loads(folder) -> None:
    saved = folder("table")
    X = _frame(seed=9)[0]
    before = PUICLClassifier.load(saved, device="cpu").predict_proba(X)

    def older(state: dict) -> None:  # PassPlanner.shared_context came with a later version
        for planner in _objects(state, "PassPlanner"):
            items = planner["state"]["__items__"]
            items[:] = [item for item in items if item[0] != "shared_context"]

    _edit_state(saved, older)
    assert PUICLClassifier.load(saved, device="cpu").predict_proba(X).tobytes() == \
        before.tobytes()


# ------------------------------------------------- entries that are not the files a save writes
def _replace_by(kind: str, name: str) -> Callable[[Path], None]:
    """The entry ``name`` replaced by a ``kind``: a link to its own copy, a FIFO, a folder."""
    def edit(saved: Path) -> None:
        import os

        entry = saved / name
        if kind == "link":
            shutil.move(entry, saved.parent / f"{entry.name}.moved")
            entry.symlink_to(saved.parent / f"{entry.name}.moved")
        elif kind == "FIFO":
            entry.unlink()
            os.mkfifo(entry)
        else:
            entry.unlink()
            entry.mkdir()
    return edit


def _manifest_bytes(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def edit(saved: Path) -> None:
        manifest = saved / "manifest.json"
        manifest.write_bytes(change(manifest.read_bytes()))
    return edit


def _manifest_version(version: Any) -> Callable[[Path], None]:
    def edit(saved: Path) -> None:
        manifest = json.loads((saved / "manifest.json").read_text())
        (saved / "manifest.json").write_text(json.dumps(manifest_for(
            manifest["files"], version, manifest.get("libraries"))))
    return edit


ENTRIES: dict[str, tuple[Callable[[Path], None], str]] = {
    "state.json a link": (_replace_by("link", "state.json"), "state.json is a link"),
    "state.json a FIFO": (_replace_by("FIFO", "state.json"), "state.json is a FIFO"),
    "state.json a folder": (_replace_by("folder", "state.json"), "state.json is a folder"),
    "weights a link": (_replace_by("link", "weights"), "weights is a link, not the folder"),
    "weights a file": (lambda saved: (shutil.rmtree(saved / "weights"),
                                      (saved / "weights").write_text("x")),
                       "weights is a file, not the folder"),
    "the manifest a link": (_replace_by("link", "manifest.json"), "manifest.json is a link"),
    "the manifest a FIFO": (_replace_by("FIFO", "manifest.json"), "manifest.json is a FIFO"),
    "the manifest in UTF-16": (_manifest_bytes(lambda data: data.decode().encode("utf-16")),
                               "manifest.json is not UTF-8 text"),
    "the manifest over 64 KB": (_manifest_bytes(lambda data: data + b" " * 70_000),
                                "manifest.json is larger than 64 KB"),
    "version '3'": (_manifest_version("3"), "a version of type str ('3'), not a whole number"),
    "version 3.0": (_manifest_version(3.0), "a version of type float (3.0), not a whole"),
    "version true": (_manifest_version(True), "a version of type bool (True), not a whole"),
}


@pytest.mark.parametrize("case", list(ENTRIES))
def test_an_entry_that_is_not_what_a_save_writes_is_named_for_what_it_is(folder, case) -> None:
    make, words = ENTRIES[case]
    saved = folder("table")
    make(saved)
    with pytest.raises(SavedModelError) as caught:
        PUICLClassifier.load(saved, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and str(saved) in message and words in message, message


# ------------------------------------------------------- values that scoring cannot read
def _object_attribute(cls: str, attribute: str, change: Callable[[Any], Any],
                      which: Callable[[dict], bool] = lambda entry: True):
    """state.json edited: ``attribute`` of the first ``cls`` entry that ``which`` picks."""
    def edit(state: dict) -> None:
        entry = next(entry for entry in _objects(state, cls) if which(entry))
        for item in entry["state"]["__items__"]:
            if item[0] == attribute:
                item[1] = change(item[1])
    return edit


def _an_array(cls: str, attribute: str, change: Callable[[np.ndarray], np.ndarray]):
    def edit(saved: Path) -> None:
        key = _array_key(saved, cls, attribute)
        _edit_arrays(saved, "arrays.safetensors",
                     lambda arrays: arrays.__setitem__(key, change(arrays[key])))
    return edit


def _fitted_array(entry: str, change: Callable[[np.ndarray], np.ndarray]):
    def edit(saved: Path) -> None:
        state = json.loads((saved / "state.json").read_text())
        key = next(value for name, value in state["fitted"]["__items__"]
                   if name == entry)["__array__"]
        _edit_arrays(saved, "arrays.safetensors",
                     lambda arrays: arrays.__setitem__(key, change(arrays[key])))
    return edit


def _blend_items(attribute: str, change: Callable[[list], Any]):
    return lambda saved: _edit_state(saved, _object_attribute(
        "Blend", attribute, lambda value: change(value["__items__"]) or value))


def _member_items(items: list) -> None:
    items[1][1] = {"__float__": "nan"}


def _portfolio_encoder(state: dict) -> dict:
    return next(value for name, value in _objects(state, "Portfolio")[0]["state"]["__items__"]
                if name == "encoder")


def _nan_encoder_fill(state: dict) -> None:
    column = next(value for name, value in _portfolio_encoder(state)["state"]["__items__"]
                  if name == "columns_")[0]
    _object_attribute("ColumnEncoding", "fill", lambda _: {"__float__": "nan"},
                      lambda entry: entry is column)(state)


def _own_preprocessor_as_column(state: dict) -> None:
    preprocessor = _objects(state, "TablePreprocessor")[0]
    columns = next(value for name, value in preprocessor["state"]["__items__"]
                   if name == "columns_")
    columns[0] = {"__ref__": preprocessor["__id__"]}


def _caches_of_no_rows(saved: Path) -> None:
    _edit_arrays(saved, "contexts.safetensors", lambda arrays: arrays.update(
        {name: array[:, :, :0] for name, array in arrays.items()
         if ".keys." in name or ".values." in name}))


def _a_setting(name: str, value: Any):
    def edit(state: dict) -> None:
        for item in state["settings"]["__items__"]:
            if item[0] == name:
                item[1] = value
    return lambda saved: _edit_state(saved, edit)


VALUES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "a blend weight of NaN": ("table", _blend_items("weights", _member_items),
                              "portfolio_.blend.weights['bagged'] is nan"),
    "a blend's scale of NaN": ("table", _blend_items("standard", lambda items: items[1][1][
        "__tuple__"].__setitem__(1, {"__float__": "nan"})),
        "portfolio_.blend.standard['bagged'] scale is nan"),
    "a blend's standard of 3 values": ("table", _blend_items("standard", lambda items: items[1][
        1]["__tuple__"].append(1.0)), "portfolio_.blend.standard['bagged'] is not a (centre"),
    "a blend member the folder lacks": ("table", _blend_items("weights", lambda items: items.append(
        ["boosted", 0.5])), "weigh 'boosted', which is neither the model nor a learner"),
    "the encoder's fill of NaN": ("table", lambda saved: _edit_state(saved, _nan_encoder_fill),
                                  "portfolio_.encoder.columns_[0].fill is nan"),
    "a scale of 0": ("table", _an_array("TablePreprocessor", "scale_", lambda a: a * 0),
                     ".scale_ holds 0 to 0, not above 0"),
    "the pool's probabilities cut to 5": ("table", _fitted_array("_pool_proba", lambda a: a[:5]),
                                          "_pool_proba holds 5 rows where 120 belong"),
    "the pool's probabilities beyond 1": ("table", _fitted_array("_pool_proba",
                                                                 lambda a: a * 7 + 3),
                                          "_pool_proba holds"),
    "a blend's probabilities beyond 1": ("table", _an_array("Blend", "pool_proba",
                                                            lambda a: a * 7 + 3),
                                         "portfolio_.blend.pool_proba holds"),
    "a blend's probabilities cut to 3": ("table", _an_array("Blend", "pool_proba",
                                                            lambda a: a[:3]),
                                         "portfolio_.blend.pool_proba holds 3 rows where"),
    "empty quantiles": ("table", _an_array("ColumnEncoding", "quantiles", lambda a: a[:0]),
                        ".quantiles is empty"),
    "a column that is its own preprocessor": ("table", lambda saved: _edit_state(
        saved, _own_preprocessor_as_column), "is a TablePreprocessor, not a column encoding"),
    "caches of no rows": ("bare", _caches_of_no_rows, "rows (at least 1)"),
    "a saved n_threads of 100000": ("table", _a_setting("n_threads", 100000),
                                    "n_threads must be a whole number from 1 to 1024"),
    "the portfolio's n_threads of 10**9": ("table", lambda saved: _edit_state(
        saved, _object_attribute("Portfolio", "n_threads", lambda _: 10**9)),
        "portfolio_.n_threads must be a whole number from 1 to 1024"),
    "a planner's member below 0": ("table", lambda saved: _edit_state(
        saved, _planner_field("member", -1)), "a seed or member below zero"),
    "a planner's seed not the fit's": ("table", lambda saved: _edit_state(
        saved, _planner_field("entropy", 7)), "is not the root seed of every pass planner"),
    "a column's offset beyond 64 bits": ("table", lambda saved: _edit_state(
        saved, _object_attribute("ColumnEncoding", "offset", lambda _: 10**50)),
        "beyond any 64-bit integer"),
    "a new row cut of 3": ("bare", lambda saved: _edit_state(saved, lambda state: next(
        item for item in state["fitted"]["__items__"] if item[0] == "_new_row_cut"
    ).__setitem__(1, 3.0)), "_new_row_cut is 3.0, not in [0, 1]"),
    "logistic coefficients beyond any fit's": ("fallback", _an_array(
        "sklearn.LogisticRegression", "coef_", lambda a: np.full_like(a, 1e308)),
        "].coef_ holds 1e+308 to 1e+308, not in "
        "[-1e+12, 1e+12]"),
    "a choice the blend does not follow": ("table", lambda saved: _edit_state(
        saved, _object_attribute("Choice", "weights", lambda weights: {
            "__items__": weights["__items__"][:1]})), "weighs other members than its choice"),
}


@pytest.mark.parametrize("case", list(VALUES))
def test_a_value_scoring_cannot_read_is_refused_naming_its_entry(folder, case) -> None:
    kind, make, words = VALUES[case]
    saved = folder(kind)
    make(saved)
    with pytest.raises(SavedModelError) as caught:
        PUICLClassifier.load(saved, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and str(saved) in message and words in message, message


@pytest.mark.parametrize("case", ["caches of no rows", "a saved n_threads of 100000"])
def test_predict_with_such_a_folder_exits_2_and_writes_nothing(folder, tmp_path, capsys,
                                                               case) -> None:
    from puicl_model.files.cli import main

    kind, make, _ = VALUES[case]
    saved = folder(kind)
    make(saved)
    out = tmp_path / "out"
    out.mkdir()
    _frame()[0].head(20).to_csv(tmp_path / "new20.csv", index=False)
    assert main(["predict", "--model", str(saved), "--input", str(tmp_path / "new20.csv"),
                 "-o", str(out / "x0.csv"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: ") and error.count("\n") == 1, error
    assert list(out.iterdir()) == []


def test_a_folder_with_positives_held_out_loads_and_its_rows_are_checked(small_weights,
                                                                         tmp_path) -> None:
    # from 600 labeled positives on, a fifth are the evidence: they stay in the passes'
    # context (and in each view's labeled rows), the portfolio holds them last, and the
    # evidence's own scores of the pool are saved beside the pool's
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(1300, 3)), columns=["a", "b", "c"])
    X.loc[950:, ["a", "b"]] += 1.5
    s = np.r_[np.ones(650, dtype=int), np.zeros(650, dtype=int)]
    clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    assert clf.n_held_out_ > 0
    saved = clf.save(tmp_path / "held")
    rows = X.head(40) + 0.25
    expected = clf.predict_proba(rows)
    assert PUICLClassifier.load(saved, device="cpu").predict_proba(rows).tobytes() == \
        expected.tobytes()
    assert clf.fitted_.held_in_context and clf.fitted_.evidence_pool_proba is not None
    for edit, words in [
        (_object_attribute("Portfolio", "n_held", lambda n: n - 1),
         r"portfolio_\.n_held is \d+, not the \d+ positives held out of the passes"),
        (lambda state: next(item for item in state["fitted"]["__items__"]
                            if item[0] == "_held_in_context").__setitem__(1, "yes"),
         r"_held_in_context is not true \(positives held out, in the passes' context\)"),
        (lambda state: state["fitted"]["__items__"].remove(next(
            item for item in state["fitted"]["__items__"] if item[0] == "_evidence_pool_proba")),
         r"_evidence_pool_proba and _held_in_context disagree"),
    ]:
        edited = Path(shutil.copytree(saved, tmp_path / f"edited{len(words)}"))
        _edit_state(edited, edit)
        with pytest.raises(SavedModelError, match=words):
            PUICLClassifier.load(edited, device="cpu")
    edited = Path(shutil.copytree(saved, tmp_path / "outside"))
    _fitted_array("_evidence_pool_proba", lambda values: values * 7 + 3)(edited)
    with pytest.raises(SavedModelError, match=r"_evidence_pool_proba holds .* not in \[0, 1\]"):
        PUICLClassifier.load(edited, device="cpu")


@pytest.mark.parametrize(("make", "words"), [
    (lambda place: place.write_text("a,b\n1,2\n"), "is a file, not a folder"),
    (lambda place: __import__("os").mkfifo(place), "is a FIFO, not a folder"),
])
def test_a_folder_that_is_no_folder_is_named_for_what_it_is(tmp_path, make, words) -> None:
    place = tmp_path / "model"
    make(place)
    with pytest.raises(SavedModelError, match=f"^{place} {words}: not a saved PUICL "):
        PUICLClassifier.load(place, device="cpu")


def test_a_blend_that_is_not_finite_gives_no_score(folder, monkeypatch) -> None:
    # what still overflows (extreme rows through extreme encodings) is refused, not written
    from puicl_model.estimator.portfolio import Portfolio
    from puicl_model.passes.scores import NonFiniteScoresError

    loaded = PUICLClassifier.load(folder("table"), device="cpu")
    monkeypatch.setattr(Portfolio, "new_row_proba",
                        lambda self, X, proba: np.full(len(X), np.nan))
    with pytest.raises(NonFiniteScoresError, match=r"the portfolio's P\(y=1\) is NaN or "
                                                   r"infinite for 160 of 160 new rows"):
        loaded.predict_proba(_frame(seed=9)[0])
