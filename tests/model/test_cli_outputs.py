"""``puicl predict``'s output path: a device stays a device, an input file is never overwritten
with the scores, and an interrupted run ends with one line and the shell's status."""

from __future__ import annotations

import os
import signal
import socket
import stat
from pathlib import Path

import pandas as pd
import pytest

from puicl_model.estimator.classifier import PUICLClassifier
from puicl_model.files.cli import main


def predict(table_csv: Path, weights: Path, *extra: str) -> int:
    return main(["predict", "--input", str(table_csv), "--label-column", "s",
                 "--weights", str(weights), "--no-progress", *extra])


def test_output_through_a_link_to_dev_null_leaves_it_a_device(table_csv, small_weights,
                                                              tmp_path, capsys) -> None:
    link = tmp_path / "discard.csv"
    link.symlink_to("/dev/null")
    assert predict(table_csv, small_weights, "-o", str(link)) == 0
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert "wrote 30 rows to" in capsys.readouterr().out


def test_output_to_a_socket_is_refused_before_the_model_runs(table_csv, small_weights,
                                                             tmp_path, capsys,
                                                             monkeypatch) -> None:
    where = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(where))
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("model ran"))
    try:
        assert predict(table_csv, small_weights, "-o", str(where)) == 2
    finally:
        server.close()
    assert capsys.readouterr().err == (f"puicl predict: error: --output {where} is a block "
                                       "device or a socket; give the path of a CSV or "
                                       "Parquet file\n")


@pytest.mark.parametrize("spelling", ["same", "dot", "link", "hard link"])
def test_output_naming_the_input_is_refused_before_the_model_runs(
        table_csv, small_weights, tmp_path, capsys, monkeypatch, spelling) -> None:
    monkeypatch.chdir(tmp_path)
    output = {"same": str(table_csv), "dot": "./t.csv", "link": "alias.csv",
              "hard link": "hard.csv"}[spelling]
    if spelling == "link":
        (tmp_path / "alias.csv").symlink_to(table_csv)
    if spelling == "hard link":
        os.link(table_csv, tmp_path / "hard.csv")
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("model ran"))
    before = table_csv.read_bytes()
    assert predict(table_csv, small_weights, "-o", output) == 2
    error = capsys.readouterr().err
    assert error == (f"puicl predict: error: --output {output} is {table_csv} (--input), which "
                     "this command reads: writing --output would overwrite it; write to another "
                     "path\n")
    assert table_csv.read_bytes() == before


@pytest.mark.parametrize("option", ["--positives", "--unlabeled"])
def test_output_naming_either_file_of_the_two_file_layout_is_refused(
        rng, small_weights, tmp_path, capsys, option) -> None:
    for name in ("pos.csv", "unl.csv"):
        pd.DataFrame({"x1": rng.normal(size=10)}).to_csv(tmp_path / name, index=False)
    hit = tmp_path / ("pos.csv" if option == "--positives" else "unl.csv")
    before = hit.read_bytes()
    code = main(["predict", "--positives", str(tmp_path / "pos.csv"), "--unlabeled",
                 str(tmp_path / "unl.csv"), "--weights", str(small_weights),
                 "-o", str(tmp_path / "." / hit.name)])
    assert code == 2
    error = capsys.readouterr().err
    assert f"is {hit} ({option}), which this command reads" in error
    assert error.count("\n") == 1
    assert hit.read_bytes() == before


def test_ctrl_c_prints_one_line_and_exits_130(table_csv, small_weights, tmp_path, capsys,
                                              monkeypatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(PUICLClassifier, "predict_and_proba", interrupted)
    try:
        code = predict(table_csv, small_weights, "-o", str(tmp_path / "out.csv"))
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("KeyboardInterrupt escaped main (a traceback for the user)")
    assert code == 130
    assert capsys.readouterr().err == "puicl predict: interrupted\n"
    assert not (tmp_path / "out.csv").exists()


class SigtermReachedTheTest(Exception):
    pass


def test_sigterm_prints_one_line_and_restores_the_handler(table_csv, small_weights, tmp_path,
                                                          capsys, monkeypatch) -> None:
    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # handled before kill returns to Python code
        pytest.fail("SIGTERM did not stop the run")

    def outer_handler(signum, frame):  # what a SIGTERM that main leaves unhandled reaches
        raise SigtermReachedTheTest

    monkeypatch.setattr(PUICLClassifier, "predict_and_proba", terminated)
    original = signal.signal(signal.SIGTERM, outer_handler)
    try:
        assert predict(table_csv, small_weights, "-o", str(tmp_path / "out.csv")) == 143
        assert signal.getsignal(signal.SIGTERM) is outer_handler
    finally:
        signal.signal(signal.SIGTERM, original)
    assert capsys.readouterr().err == "puicl predict: interrupted\n"
    assert not (tmp_path / "out.csv").exists()
