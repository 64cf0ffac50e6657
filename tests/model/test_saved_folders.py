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
    return PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)


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


def test_a_saved_classifiers_cut_is_checked_in_one_note_line(saved, tmp_path, table,
                                                             capsys) -> None:
    """The cut's check on the saved pool, said by ``--model`` once as a note line, as
    ``puicl predict`` fitting the table says it, and never as a Python warning."""
    import warnings

    from puicl_model.estimator.prior_report import ThresholdWarning

    loaded = PUICLClassifier.load(saved, device="cpu")
    note = loaded.fitted_.threshold_note(0.9, loaded._runtime())
    assert note is not None  # (0.9: the random test model's probabilities crowd it)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThresholdWarning)
        assert main(["predict", "--model", str(saved), "--input", str(table),
                     "--drop-columns", "s", "--threshold", "0.9",
                     "-o", str(tmp_path / "scores.csv")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert said == [f"puicl predict: note: {note}"]


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


# ------------------------------------------------- item: --save-model's failures before the scores
def test_a_save_folder_whose_parent_refuses_folders_is_refused_before_the_fit(
        tmp_path, table, capsys, no_fit, monkeypatch) -> None:
    import errno
    import tempfile

    def refuse(*args, **kwargs):  # (a read-only folder; the tests may run as root)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    folder = tmp_path / "locked" / "model"
    assert main(["predict", "--input", str(table), "--label-column", "s", "--no-progress",
                 "-o", str(tmp_path / "scores.csv"), "--save-model", str(folder)]) == 2
    error = one_line_error(capsys)
    assert f"cannot write --save-model {folder}: {tmp_path}: Permission denied" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_a_save_that_fails_leaves_no_scores(tmp_path, table, capsys, monkeypatch,
                                            small_weights) -> None:
    import errno

    import puicl_model.estimator.saved_model as saved_model

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(saved_model, "atomic_write_bytes", full)
    folder = tmp_path / "model"
    assert main(["predict", "--input", str(table), "--label-column", "s", "--no-progress",
                 "--weights", str(small_weights), "--portfolio", "none",
                 "-o", str(tmp_path / "scores.csv"), "--prior-json", str(tmp_path / "p.json"),
                 "--save-model", str(folder)]) == 2
    error = one_line_error(capsys)
    assert f"cannot write --save-model {folder}: No space left on device" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


# ------------------------------------------------------- item: leftovers and concurrent readers
def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_save_removes_what_killed_saves_left(fitted, saved, tmp_path) -> None:
    import os

    from puicl_model.estimator import saved_folder

    host = saved_folder._tag().split("-")[0]
    dead, alive = _dead_pid(), os.getpid()
    leftovers = {f".m3.tmp-{host}-{dead}-abc123": False, f".m3.old-{host}-{dead}-def456": False,
                 f".m3.tmp-{host}-{alive}-ghi789": True}  # a save under way: kept
    for name in leftovers:
        (tmp_path / name / "weights").mkdir(parents=True)
        (tmp_path / name / "state.json").write_bytes(b"x" * 1000)
    (tmp_path / ".m3.tmp-notes").mkdir()  # not a staging folder's name: not touched
    fitted.save(saved)
    assert {name for name in leftovers if (tmp_path / name).exists()} == {
        name for name, kept in leftovers.items() if kept}
    assert (tmp_path / ".m3.tmp-notes").is_dir()


@pytest.mark.parametrize("swap", ["exchange", "two renames"])
def test_a_load_during_a_resave_gives_the_old_or_the_new_classifier(
        fitted, saved, small_weights, monkeypatch, swap) -> None:
    import puicl_model.estimator.saved_model as saved_model
    from puicl_model.estimator import saved_folder

    if swap == "two renames":
        monkeypatch.setattr(saved_folder, "_exchange", lambda first, second: False)
    X, s = _frame(30, 90, seed=8)
    other = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none",
                            threshold=0.3).fit(X, s)
    hashed, original = [], saved_model._sha256

    def resave_midway(path):
        digest = original(path)
        hashed.append(path)
        if len(hashed) == 1:  # the reader has checked one file: the folder is saved again
            other.save(saved)
        return digest

    monkeypatch.setattr(saved_model, "_sha256", resave_midway)
    loaded = PUICLClassifier.load(saved, device="cpu")
    assert loaded.threshold == 0.3
    assert loaded.predict_proba(X).tobytes() == other.predict_proba(X).tobytes()


def test_a_folder_that_keeps_changing_is_refused_in_one_line(saved, monkeypatch) -> None:
    import os

    import puicl_model.estimator.saved_model as saved_model

    original = saved_model._sha256

    def touch_manifest(path):  # a save landing during every read
        os.utime(saved / "manifest.json", ns=(1, os.stat(saved / "manifest.json").st_mtime_ns
                                              + 1))
        return original(path)

    monkeypatch.setattr(saved_model, "_sha256", touch_manifest)
    monkeypatch.setattr(saved_model.time, "sleep", lambda seconds: None)
    with pytest.raises(SavedModelError, match="kept changing while it was read"):
        PUICLClassifier.load(saved, device="cpu")


# ------------------------------------------------------------- item: names confined to the folder
def _relisted(saved: Path, name: str, replaces: str = "state.json") -> None:
    """The manifest rewritten as anyone can: ``replaces`` listed as ``name``."""
    from puicl_model.estimator.saved_folder import manifest_for

    manifest = json.loads((saved / "manifest.json").read_text())
    files = dict(manifest["files"])
    files[name] = files.pop(replaces)
    (saved / "manifest.json").write_text(json.dumps(manifest_for(files, manifest["version"])))


@pytest.mark.parametrize("name", ["../outside_secret.txt", "/etc/hostname",
                                  "/no/such/file", "weights/../state.json", "notes.txt"])
def test_a_manifest_naming_a_file_outside_the_folder_is_refused(saved, tmp_path, name,
                                                               monkeypatch) -> None:
    import puicl_model.estimator.saved_model as saved_model

    (tmp_path / "outside_secret.txt").write_text("secret")
    read, original = [], saved_model._sha256
    monkeypatch.setattr(saved_model, "_sha256", lambda path: read.append(path) or original(path))
    _relisted(saved, name)
    with pytest.raises(SavedModelError) as caught:
        PUICLClassifier.load(saved, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and "is not a file of a saved PUICL classifier" in message
    assert not read  # nothing hashed, nothing looked up


# ---------------------------------------------------------------------------- item: the umask
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_saved_folder_respects_the_umask(small_weights, tmp_path, umask) -> None:
    import os
    import stat

    X, s = _frame(30, 90)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)
    previous = os.umask(umask)
    try:
        for training_data in (True, False):
            folder = clf.save(tmp_path / f"m{training_data}", training_data=training_data)
            for path in [folder, *folder.rglob("*")]:
                mode = stat.S_IMODE(path.stat().st_mode)
                assert mode == (0o777 if path.is_dir() else 0o666) & ~umask, (path, oct(mode))
    finally:
        os.umask(previous)


def test_model_refuses_a_prior_threshold_without_its_estimate(fitted, tmp_path, table,
                                                              capsys) -> None:
    bare = fitted.save(tmp_path / "bare", training_data=False)  # π̂ never estimated
    assert main(["predict", "--model", str(bare), "--input", str(table), "--drop-columns",
                 "s", "--threshold", "prior", "-o", str(tmp_path / "out.csv")]) == 2
    assert "--threshold prior: " in one_line_error(capsys)
    assert not (tmp_path / "out.csv").exists()


# ------------------------------------------------------------------ the libraries saved under
def test_a_folder_records_its_libraries_and_a_load_under_others_warns(fitted, saved) -> None:
    import warnings

    from puicl_model.estimator.saved_folder import library_versions, manifest_for

    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["libraries"] == library_versions()
    rows = _frame(10, 30, seed=9)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same versions: no warning
        expected = PUICLClassifier.load(saved, device="cpu").predict_proba(rows)
    # written under another torch (the manifest rewritten, its checksum too)
    other = {**manifest["libraries"], "torch": "0.0.1"}
    (saved / "manifest.json").write_text(json.dumps(
        manifest_for(manifest["files"], manifest["version"], other)))
    with pytest.warns(UserWarning, match=r"other library versions \(torch 0\.0\.1 → ") as heard:
        loaded = PUICLClassifier.load(saved, device="cpu")
    assert "\n" not in str(heard[0].message)
    np.testing.assert_array_equal(loaded.predict_proba(rows), expected)
    # a folder saved before versions were recorded loads without a word
    (saved / "manifest.json").write_text(json.dumps(
        manifest_for(manifest["files"], manifest["version"])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PUICLClassifier.load(saved, device="cpu")
    # and versions that are no text are a damaged manifest
    broken = {**manifest, "libraries": {"torch": 2}}
    (saved / "manifest.json").write_text(json.dumps(broken))
    with pytest.raises(SavedModelError, match="damaged"):
        PUICLClassifier.load(saved, device="cpu")


def test_trees_that_do_not_score_as_scikit_learns_stop_the_save(monkeypatch) -> None:
    """The trees' arrays are read from scikit-learn's private objects; a version that laid
    them out otherwise must stop the save in one line (``saving`` then writes nothing)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from puicl_model.estimator import saved_model
    from puicl_model.estimator.saved_trees import BoostedTrees

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 4))
    model = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(
        x, (x[:, 0] * x[:, 1] > 0).astype(int))
    assert isinstance(saved_model._savable(model), BoostedTrees)  # read as scikit-learn scores
    original = BoostedTrees.from_sklearn

    def shifted(fitted):
        trees = original(fitted)
        trees.value = trees.value + 1e-3 * (trees.is_leaf == 1)  # another layout's leaves
        return trees

    monkeypatch.setattr(saved_model.BoostedTrees, "from_sklearn", shifted)
    with pytest.raises(ValueError, match="keeps its boosted trees in a form") as refused:
        saved_model._savable(model)
    assert "\n" not in str(refused.value)


def test_a_forest_saved_as_arrays_scores_as_scikit_learns_or_stops_the_save(monkeypatch) -> None:
    """PU bagging's forests are saved as node arrays that give the fitted forest's log-odds
    bit for bit, missing values among the rows; arrays that do not stop the save."""
    from sklearn.ensemble import RandomForestClassifier

    from puicl_model.estimator import saved_model
    from puicl_model.estimator.learners import row_decision
    from puicl_model.estimator.saved_trees import ForestTrees

    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 4))
    x[rng.random(x.shape) < 0.1] = np.nan  # the forest learns where missing values go
    model = RandomForestClassifier(n_estimators=5, min_samples_leaf=10, n_jobs=1,
                                   random_state=0).fit(x, (np.nan_to_num(x[:, 0]) > 0).astype(int))
    saved = saved_model._savable(model)
    assert isinstance(saved, ForestTrees) and saved.problem(4) is None
    rows = rng.normal(size=(300, 4))
    rows[rng.random(rows.shape) < 0.2] = np.nan
    assert saved.decision_function(rows).tobytes() == row_decision(model, rows).tobytes()
    original = ForestTrees.from_sklearn

    def shifted(fitted):
        forest = original(fitted)
        forest.share = forest.share * 0.999  # another version's leaves
        return forest

    monkeypatch.setattr(saved_model.ForestTrees, "from_sklearn", shifted)
    with pytest.raises(ValueError, match="scores its random forests in a way") as refused:
        saved_model._savable(model)
    assert "\n" not in str(refused.value)


def test_save_to_a_read_only_place_names_the_folder_not_its_staging(fitted,
                                                                    read_only_place) -> None:
    folder = read_only_place / "model"
    with pytest.raises(OSError) as caught:
        fitted.save(folder)
    message = str(caught.value)
    assert str(folder) in message and ".tmp-" not in message and "\n" not in message
    assert caught.value.filename == str(folder)


def test_save_through_a_missing_folder_is_refused_before_any_work(fitted, tmp_path,
                                                                  monkeypatch) -> None:
    import puicl_model.estimator.saved_model as saved_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "vdir").mkdir()
    (tmp_path / "vdir" / "notes.txt").write_text("mine")
    monkeypatch.setattr(saved_model, "stage", lambda *a: pytest.fail("the save began"))
    with pytest.raises(SavedModelError, match=r"^nosuch/\.\./vdir goes up \(\.\.\) out of "
                                              r"nosuch, which is not an existing folder"):
        fitted.save("nosuch/../vdir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vdir"]
    assert (tmp_path / "vdir" / "notes.txt").read_text() == "mine"


def test_save_through_a_link_goes_where_the_link_leads(fitted, tmp_path, monkeypatch) -> None:
    # "link/../model" is beside the link's target, as the file system resolves it, not
    # beside the link: the save is checked and written there
    (tmp_path / "elsewhere" / "inner").mkdir(parents=True)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "link").symlink_to(tmp_path / "elsewhere" / "inner")
    fitted.save(tmp_path / "here" / "link" / ".." / "model")
    assert (tmp_path / "elsewhere" / "model" / "manifest.json").is_file()
    assert not (tmp_path / "here" / "model").exists()
