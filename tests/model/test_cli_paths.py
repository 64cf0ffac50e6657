"""``puicl predict``'s outputs against its inputs: no output may name a file the command reads
(a table, the weights files, the bundled weights), the two tables must be two files, and every
output's folder is checked before the model runs; errors are one line and say it in the
options' terms."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from puicl_model.estimator.classifier import PUICLClassifier
from puicl_model.files.cli import main


@pytest.fixture
def weights_dir(small_weights, tmp_path) -> Path:
    """A copy of the small checkpoint that a failing test may damage."""
    return Path(shutil.copytree(small_weights, tmp_path / "weights"))


@pytest.fixture
def no_fit(monkeypatch) -> None:
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("the model ran"))


def snapshot(*paths: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in paths}


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: ") and error.count("\n") == 1, error
    return error.strip()


@pytest.mark.parametrize("option", ["-o", "--prior-json"])
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_an_output_naming_a_weights_file_is_refused(table_csv, weights_dir, capsys, no_fit,
                                                    option, name) -> None:
    files = snapshot(weights_dir / "model.safetensors", weights_dir / "config.json", table_csv)
    code = main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(weights_dir), "--no-progress", option, str(weights_dir / name)])
    assert code == 2
    error = one_line_error(capsys)
    assert f"is {weights_dir / name} (" in error and "which this command reads" in error
    assert snapshot(*files) == files


def test_an_output_naming_the_file_given_as_weights_is_refused(table_csv, weights_dir, capsys,
                                                               no_fit, tmp_path) -> None:
    single = tmp_path / "alone.safetensors"
    shutil.copy(weights_dir / "model.safetensors", single)
    before = single.read_bytes()
    assert main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(single), "-o", str(tmp_path / "." / "alone.safetensors")]) == 2
    assert "(--weights), which this command reads" in one_line_error(capsys)
    assert single.read_bytes() == before


def test_an_output_at_the_bundled_weights_is_refused(table_csv, weights_dir, capsys, no_fit,
                                                     tmp_path, monkeypatch) -> None:
    import puicl_model.net.weights as weights

    # a stand-in for the installed package's file, so that a failure damages nothing shared
    monkeypatch.setattr(weights, "bundled_weights_path",
                        lambda: weights_dir / "model.safetensors")
    files = snapshot(weights_dir / "model.safetensors", weights_dir / "config.json")
    link = tmp_path / "scores.csv"
    link.symlink_to(weights_dir / "model.safetensors")
    for output in (weights_dir / "model.safetensors", link, weights_dir / "config.json"):
        assert main(["predict", "--input", str(table_csv), "--label-column", "s", "-o",
                     str(output)]) == 2
        assert "the bundled weights), which this command reads" in one_line_error(capsys)
    assert snapshot(*files) == files


def test_the_prior_json_and_the_output_on_one_path_are_refused(table_csv, small_weights,
                                                               capsys, no_fit, tmp_path) -> None:
    assert main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(small_weights), "-o", str(tmp_path / "r.csv"), "--prior-json",
                 str(tmp_path / "." / "r.csv")]) == 2
    assert "both would be written to one file" in one_line_error(capsys)


def test_a_prior_json_under_a_regular_file_is_refused_before_the_model_runs(
        table_csv, small_weights, capsys, no_fit, tmp_path) -> None:
    (tmp_path / "somefile").write_text("x")
    out = tmp_path / "scores.csv"
    assert main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(small_weights), "-o", str(out), "--prior-json",
                 str(tmp_path / "somefile" / "x.json")]) == 2
    error = one_line_error(capsys)
    assert error.endswith(f"--prior-json {tmp_path / 'somefile' / 'x.json'} cannot be created: "
                          f"{tmp_path / 'somefile'} is a file, not a directory")
    assert not out.exists()


@pytest.mark.parametrize("spelling", ["same", "link"])
def test_one_file_given_as_both_tables_is_refused(rng, small_weights, tmp_path, capsys, no_fit,
                                                  spelling) -> None:
    pd.DataFrame({"x1": rng.normal(size=20)}).to_csv(tmp_path / "rows.csv", index=False)
    other = tmp_path / "rows.csv"
    if spelling == "link":
        other = tmp_path / "alias.csv"
        other.symlink_to(tmp_path / "rows.csv")
    assert main(["predict", "--positives", str(tmp_path / "rows.csv"), "--unlabeled",
                 str(other), "--weights", str(small_weights)]) == 2
    assert one_line_error(capsys).endswith("are one file; give the labeled positives and the "
                                           "unlabeled rows in two files")


def test_an_output_folder_that_refuses_files_is_named_before_the_model_runs(
        table_csv, small_weights, capsys, no_fit, read_only_place) -> None:
    out = read_only_place / "scores.csv"
    assert main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(small_weights), "-o", str(out)]) == 2
    error = one_line_error(capsys)
    assert error.startswith(f"puicl predict: error: cannot write --output {out}: "
                            f"{read_only_place.parent}: ")
    assert ".tmp-" not in error and ".puicl-probe-" not in error


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--batch-rows", "-1", "--batch-rows: expected a whole number >= 1, got '-1'"),
    ("--pool-sample", "1", "--pool-sample: expected 0 (fit the whole pool) or a whole number "
                          ">= 100, got '1'"),
    ("--pool-sample", "20", "--pool-sample: expected 0 (fit the whole pool) or a whole number "
                           ">= 100, got '20'"),
])
def test_sizes_are_refused_in_the_options_terms(table_csv, small_weights, capsys, option, value,
                                                message) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
              str(small_weights), option, value])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def _foreign_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "vdir"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    return folder


@pytest.mark.parametrize("option", ["-o", "--prior-json", "--report", "--save-model"])
def test_an_output_spelled_through_a_missing_folder_is_refused_before_the_model_runs(
        table_csv, small_weights, tmp_path, capsys, no_fit, monkeypatch, option) -> None:
    # a writer that creates "nosuch" first would reach what the ".." leads to: the input
    # table, or (--save-model) a folder of someone else's
    monkeypatch.chdir(tmp_path)
    target = "nosuch/../vdir" if option == "--save-model" else "nosuch/../t.csv"
    files = snapshot(table_csv)
    extra = [] if option == "-o" else ["-o", str(tmp_path / "scores.csv")]
    _foreign_folder(tmp_path)
    assert main(["predict", "--input", str(table_csv), "--label-column", "s", "--weights",
                 str(small_weights), "--no-progress", *extra, option, target]) == 2
    assert one_line_error(capsys).endswith(f"{target} goes up (..) out of nosuch, which is not "
                                           "an existing folder: spell the path without it")
    assert snapshot(*files) == files and (tmp_path / "vdir" / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "nosuch").exists() and not (tmp_path / "scores.csv").exists()


def test_an_output_spelled_through_a_missing_folder_spares_a_saved_folder_and_weights(
        table_csv, weights_dir, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    saved = PUICLClassifier(weights=weights_dir, device="cpu").fit(
        pd.read_csv(table_csv).drop(columns="s"), pd.read_csv(table_csv)["s"]).save(tmp_path / "mv")
    files = snapshot(saved / "state.json", weights_dir / "model.safetensors")
    rows = tmp_path / "rows.csv"
    pd.read_csv(table_csv).drop(columns="s").to_csv(rows, index=False)
    for args in (["--model", "mv", "-o", "nosuch2/../mv/state.json"],
                 ["--label-column", "s", "--weights", str(weights_dir), "-o",
                  f"nosuch3/../{weights_dir.name}/model.safetensors"]):
        source = str(rows) if "--model" in args else str(table_csv)
        assert main(["predict", "--input", source, "--no-progress", *args]) == 2
        assert "goes up (..) out of nosuch" in one_line_error(capsys)
    assert snapshot(*files) == files
    assert not (tmp_path / "nosuch2").exists() and not (tmp_path / "nosuch3").exists()
    PUICLClassifier.load(saved, device="cpu")  # still intact
