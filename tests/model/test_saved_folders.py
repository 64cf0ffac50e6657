"""What a save may replace and what ``--model`` / ``--save-model`` may touch: a folder that is
not a saved classifier (or holds anything else) is refused whole and left as it was, a saved
folder's files are inputs no output may overwrite, and ``--model`` refuses the options it would
not use. Every refusal is one line, before the fit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.saved_model import SavedModelError
from puicl_model.files.cli import main

pytestmark = pytest.mark.usefixtures("one_openmp_thread")


def _frame(n_labeled: int, n_pool: int, seed: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(n_labeled + n_pool, 3)), columns=["a", "b", "c"])
    frame.loc[n_labeled + n_pool // 2:, ["a", "b"]] += 1.5
    return frame, np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]


@pytest.fixture(scope="module")
def fitted(small_weights) -> PUICLClassifier:
    X, s = _frame(30, 90)
    return PUICLClassifier(weights=small_weights, device="cpu", partner="none").fit(X, s)


@pytest.fixture(scope="module")
def saved_once(fitted, tmp_path_factory) -> Path:
    return fitted.save(tmp_path_factory.mktemp("saved") / "model")


@pytest.fixture
def saved(saved_once, tmp_path) -> Path:
    """A saved classifier's folder of the test's own."""
    return Path(shutil.copytree(saved_once, tmp_path / "m3"))


@pytest.fixture
def table(tmp_path) -> Path:
    X, s = _frame(30, 90)
    X.assign(s=s).to_csv(tmp_path / "table.csv", index=False)
    return tmp_path / "table.csv"


@pytest.fixture
def no_fit(monkeypatch) -> None:
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("the model ran"))


def tree(folder: Path) -> dict[str, bytes | str]:
    """Everything under ``folder`` (itself included), byte for byte, links as links."""
    entries: dict[str, bytes | str] = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            entries[name] = f"link to {path.readlink()}"
        elif path.is_file():
            entries[name] = path.read_bytes()
        else:
            entries[name] = f"folder {oct(path.stat().st_mode)}"
    return entries


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: ") and error.count("\n") == 1, error
    return error.strip()


def _shard_folder(root: Path) -> Path:
    """A stand-in for a prior-gen shard folder: its own manifest.json and many files."""
    folder = root / "shards"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format": "puicl-prior-shards",
                                                      "version": 3, "shards": 12}))
    for number in range(12):
        (folder / f"shard-{number:05d}.zarr").write_bytes(bytes([number]) * 64)
    return folder


def _linked_manifest(root: Path, saved: Path) -> Path:
    folder = root / "linked"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    (folder / "manifest.json").symlink_to(saved / "manifest.json")
    return folder


def _empty_manifest(root: Path, saved: Path) -> Path:
    folder = root / "empty_manifest"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(b"")
    (folder / "mine.txt").write_text("keep me")
    return folder


VICTIMS = {"shard folder": lambda root, saved: _shard_folder(root),
           "linked manifest": _linked_manifest, "empty manifest": _empty_manifest}


# ------------------------------------------------------------------------------- item: victims
@pytest.mark.parametrize("victim", list(VICTIMS))
def test_a_save_refuses_a_folder_with_a_foreign_manifest(fitted, saved, tmp_path, victim,
                                                         capsys, table, no_fit) -> None:
    folder = VICTIMS[victim](tmp_path, saved)
    before = tree(folder)
    with pytest.raises(SavedModelError, match="is not a saved PUICL classifier") as caught:
        fitted.save(folder)
    assert "\n" not in str(caught.value)
    assert main(["predict", "--input", str(table), "--label-column", "s", "--no-progress",
                 "-o", str(tmp_path / "scores.csv"), "--save-model", str(folder)]) == 2
    assert "is not a saved PUICL classifier" in one_line_error(capsys)
    assert tree(folder) == before
    assert not (tmp_path / "scores.csv").exists()
    assert not list(tmp_path.glob(f".{folder.name}.*"))  # no staging left


def test_a_save_refuses_the_current_folder(fitted, saved, tmp_path, monkeypatch, capsys,
                                           table, no_fit) -> None:
    monkeypatch.chdir(saved)  # a saved classifier, but the folder the command runs in
    before = tree(saved)
    for spelling in (".", str(saved), "../m3"):
        with pytest.raises(SavedModelError, match="holds the current folder"):
            fitted.save(spelling)
        assert main(["predict", "--input", str(table), "--label-column", "s",
                     "--no-progress", "-o", str(tmp_path / "scores.csv"),
                     "--save-model", spelling]) == 2
        assert "holds the current folder" in one_line_error(capsys)
    assert tree(saved) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m3", "table.csv"]


# ------------------------------------------------------------- item: a re-save keeps others' files
def test_a_resave_refuses_a_folder_holding_other_files(fitted, saved, tmp_path, capsys,
                                                       no_fit) -> None:
    X, s = _frame(30, 90)
    X.assign(s=s).to_csv(saved / "mydata.csv", index=False)
    (saved / "notes.txt").write_text("my notes")
    before = tree(saved)
    with pytest.raises(SavedModelError, match=r"holds mydata\.csv, which a saved PUICL"):
        fitted.save(saved)
    assert main(["predict", "--input", str(saved / "mydata.csv"), "--label-column", "s",
                 "-o", str(saved / "scores.csv"), "--prior-json", str(saved / "prior.json"),
                 "--save-model", str(saved), "--no-progress"]) == 2
    assert "holds mydata.csv" in one_line_error(capsys)
    assert tree(saved) == before


@pytest.mark.parametrize("option", ["--output", "--prior-json", "--weights", "--report"])
def test_an_input_or_output_inside_the_save_folder_is_refused(saved, tmp_path, capsys, table,
                                                              option, no_fit) -> None:
    pytest.importorskip("matplotlib") if option == "--report" else None
    inside = {"--output": saved / "scores.csv", "--prior-json": saved / "sub" / "p.json",
              "--weights": saved / "weights", "--report": saved / "r.html"}[option]
    before = tree(saved)
    argv = ["predict", "--input", str(table), "--label-column", "s", "--save-model",
            str(saved), "--no-progress", option, str(inside)]
    if option != "--output":
        argv += ["-o", str(tmp_path / "scores.csv")]
    assert main(argv) == 2
    error = one_line_error(capsys)
    assert error.startswith(f"puicl predict: error: {option} {inside}") and (
        f"lies in --save-model {saved}: the save replaces that folder whole" in error), error
    assert tree(saved) == before
    assert not (tmp_path / "scores.csv").exists()


def test_the_output_and_the_save_folder_on_one_path_are_refused(tmp_path, capsys, table,
                                                                no_fit) -> None:
    for output, folder in ((tmp_path / "x", tmp_path / "x"),
                           (tmp_path / "m" / "p.json", tmp_path / "m")):
        assert main(["predict", "--input", str(table), "--label-column", "s", "-o",
                     str(output), "--save-model", str(folder), "--no-progress"]) == 2
        assert "lies in --save-model" in one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


# -------------------------------------------------------------- item: --model's files are inputs
@pytest.mark.parametrize("name", ["state.json", "manifest.json", "weights/model.safetensors",
                                  "weights/config.json", "arrays.safetensors",
                                  "contexts.safetensors"])
def test_an_output_over_a_saved_classifiers_file_is_refused(saved, tmp_path, table, capsys,
                                                            name) -> None:
    before = tree(saved)
    assert main(["predict", "--model", str(saved), "--input", str(table), "--drop-columns",
                 "s", "-o", str(saved / name)]) == 2
    error = one_line_error(capsys)
    assert "the saved classifier's" in error or "lies in" in error, error
    if name != "contexts.safetensors":  # (a folder with its table has none)
        assert "which this command reads" in error
    assert tree(saved) == before
    PUICLClassifier.load(saved, device="cpu")


# --------------------------------------------------------------- item: --model's unused options
def test_model_applies_the_threshold(saved, tmp_path, table) -> None:
    X = pd.read_csv(table).drop(columns="s")
    loaded = PUICLClassifier.load(saved, device="cpu")
    labels = {}
    for threshold in ("0.9", "0.1", "prior"):
        output = tmp_path / f"{threshold}.csv"
        assert main(["predict", "--model", str(saved), "--input", str(table),
                     "--drop-columns", "s", "--threshold", threshold, "-o", str(output)]) == 0
        scores = pd.read_csv(output)
        loaded.set_params(threshold=threshold if threshold == "prior" else float(threshold))
        assert (scores["label"].to_numpy() == loaded.predict(X)).all()
        labels[threshold] = scores["label"].to_numpy()
    assert labels["0.9"].sum() < labels["0.1"].sum()
    # without --threshold: the saved cut (0.5)
    assert main(["predict", "--model", str(saved), "--input", str(table), "--drop-columns",
                 "s", "-o", str(tmp_path / "saved_cut.csv")]) == 0
    proba = pd.read_csv(tmp_path / "saved_cut.csv")["p_positive"].to_numpy()
    assert (pd.read_csv(tmp_path / "saved_cut.csv")["label"] == (proba > 0.5)).all()


@pytest.mark.parametrize("flags", [["--prior-json", "p.json"], ["--scheduler", "tcp://x:1"],
                                   ["--weights", "w"], ["--no-training-data"],
                                   ["--n-estimators", "3"], ["--random-state", "4"]])
def test_model_refuses_the_options_it_would_not_use(saved, tmp_path, table, capsys,
                                                    flags) -> None:
    flags = [str(tmp_path / flag) if flag in ("p.json", "w") else flag for flag in flags]
    assert main(["predict", "--model", str(saved), "--input", str(table), "--drop-columns",
                 "s", "-o", str(tmp_path / "out.csv"), *flags]) == 2
    assert f"--model takes no {flags[0]}" in one_line_error(capsys)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "p.json").exists()
