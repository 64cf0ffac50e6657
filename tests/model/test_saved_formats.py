"""Folders saved by earlier puicl releases load and score as they did there.

``data/saved_formats`` holds two folders written by the release before type tags (format
versions 1, with the table, and 2, without it) with ``make_folders.py``, and the scores the
classifiers loaded from them gave then. The pool rows of a folder with its table are its saved
transductive scores (the same bits); new rows are scored again by the model, whose last bits
may differ on another CPU.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.saved_folder import FORMAT_VERSION, WITHOUT_TRAINING_DATA_VERSION
from puicl_model.estimator.saved_state import TYPES

FOLDERS = Path(__file__).parent / "data" / "saved_formats"


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    with np.load(FOLDERS / "expected.npz") as arrays:
        return dict(arrays)


@pytest.mark.parametrize(("name", "version"), [("with_table", 1), ("without_table", 2)])
def test_a_folder_of_an_earlier_format_scores_as_it_did(expected, tmp_path, name,
                                                        version) -> None:
    folder = FOLDERS / name
    assert json.loads((folder / "manifest.json").read_text())["version"] == version
    state = (folder / "state.json").read_text()
    assert "puicl_model.estimator.ensemble.View" in state  # module paths, not type tags
    loaded = PUICLClassifier.load(folder, device="cpu")
    new = expected["new"]
    np.testing.assert_allclose(loaded.predict_proba(new), expected[f"{name}_new"], rtol=0,
                               atol=1e-6)
    np.testing.assert_array_equal(loaded.predict(new), expected[f"{name}_labels"])
    if version == 1:
        pool = expected["X"][expected["s"] == 0]
        assert loaded.predict_proba(pool).tobytes() == expected[f"{name}_pool"].tobytes()
    # saved again, it is written in today's format, by type tags, and scores the same
    again = PUICLClassifier.load(loaded.save(tmp_path / "again", training_data=version == 1),
                                 device="cpu")
    manifest = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert manifest["version"] == (FORMAT_VERSION if version == 1
                                   else WITHOUT_TRAINING_DATA_VERSION)
    written = (tmp_path / "again" / "state.json").read_text()
    assert '"View"' in written and not any(path in written for path in TYPES.values())
    assert again.predict_proba(new).tobytes() == loaded.predict_proba(new).tobytes()


def test_a_folder_of_a_newer_format_is_refused_naming_its_version(tmp_path) -> None:
    from puicl_model.estimator.saved_folder import SavedModelError, manifest_for

    folder = tmp_path / "later"
    shutil.copytree(FOLDERS / "with_table", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(manifest_for(
        manifest["files"], 99, manifest.get("libraries"))))
    with pytest.raises(SavedModelError, match="version 99; this puicl reads"):
        PUICLClassifier.load(folder, device="cpu")


@pytest.mark.parametrize("with_table", [True, False])
def test_a_folder_holds_exactly_the_declared_state(small_weights, tmp_path, with_table) -> None:
    """What a save writes of the fitted classifier is what its scorer declares (``SAVED``) and
    the classifier's scikit-learn attributes, whatever else the objects hold."""
    from puicl_model.estimator.fitted_scorer import SAVED_CLASSIFIER, ContextsOnly
    from puicl_model.estimator.fitted_table import FittedTable

    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 3))
    s = (np.arange(150) < 40).astype(int)
    clf = PUICLClassifier(weights=small_weights, device="cpu", threshold="prior").fit(X, s)
    clf.fitted_.note = "not declared"  # an attribute added to the object is not saved
    folder = clf.save(tmp_path / "saved", training_data=with_table)
    fitted = json.loads((folder / "state.json").read_text())["fitted"]["__items__"]
    declared = (FittedTable if with_table else ContextsOnly).SAVED
    assert {key for key, _ in fitted} == set(declared) | (set(SAVED_CLASSIFIER)
                                                          - {"feature_names_in_"})
    loaded = PUICLClassifier.load(folder, device="cpu")
    assert type(loaded.fitted_) is (FittedTable if with_table else ContextsOnly)
    assert not hasattr(loaded.fitted_, "note")


def test_a_classifier_without_its_table_holds_every_context_once_loaded(small_weights,
                                                                         tmp_path) -> None:
    """Its store of contexts is whole from ``load`` (threads that score at once never find it
    half filled), and a copy's, which arrives empty, is built whole before it is used; the
    table's parts it lacks say why."""
    import pickle

    rng = np.random.default_rng(5)
    X = rng.normal(size=(260, 3))
    s = (np.arange(260) < 40).astype(int)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                          single_pass_limit=60, chunk_size=40, large_pool="chunks").fit(X, s)
    loaded = PUICLClassifier.load(clf.save(tmp_path / "bare", training_data=False),
                                  device="cpu")
    saved = loaded.fitted_.saved_contexts
    assert len(saved) > 2 and len(loaded.fitted_.contexts) == len(saved)
    copy = pickle.loads(pickle.dumps(loaded))
    assert not copy.fitted_.contexts  # (arrives empty)
    new = rng.normal(size=(5, 3))
    assert copy.predict_proba(new).tobytes() == loaded.predict_proba(new).tobytes()
    assert len(copy.fitted_.contexts) == len(saved)
    with pytest.raises(AttributeError, match="x_pool_ needs the training data"):
        loaded.x_pool_  # noqa: B018


def test_a_folder_with_positives_held_out_of_every_pass_scores_as_it_did(tmp_path) -> None:
    """A folder saved while held-out positives were kept out of every pass's context (and
    followed the pool in each view) loads and scores as it did: its pool's and new rows'
    scores, π̂ and the held-out scores π̂ reads; saved again, it keeps that layout."""
    folder = Path(__file__).parent / "data" / "held_out_folder"
    with np.load(folder / "expected.npz") as arrays:
        expected = dict(arrays)
    loaded = PUICLClassifier.load(folder / "folder", device="cpu")
    assert loaded.n_held_out_ > 0 and not loaded.fitted_.held_in_context
    X, s = expected["X"], expected["s"]
    assert loaded.predict_proba(X[s == 0]).tobytes() == expected["pool"].tobytes()
    np.testing.assert_allclose(loaded.predict_proba(expected["new"]), expected["new_scores"],
                               rtol=0, atol=1e-6)
    held, pool = loaded.held_out_scores()[0]
    assert held.tobytes() == expected["held"].tobytes()
    assert pool.tobytes() == expected["held_pool"].tobytes()
    assert loaded.estimate_class_prior() == float(expected["pi_hat"])
    assert loaded.fitted_.n_labeled == int(s.sum())
    again = PUICLClassifier.load(loaded.save(tmp_path / "again"), device="cpu")
    assert not again.fitted_.held_in_context
    assert again.predict_proba(X[s == 0]).tobytes() == expected["pool"].tobytes()
