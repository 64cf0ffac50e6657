"""The report a person looks at (``plot_report``, ``puicl predict --report``): its figures
render, the page holds them and the words, with the portfolio and without it."""

from __future__ import annotations

import base64
import html
import sys

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.report import FIGURES, figure_paths
from puicl_model.files.cli import main

pytest.importorskip("matplotlib")


pytestmark = pytest.mark.usefixtures("one_openmp_thread")


def _table(n_labeled: int, n_pool: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pool = rng.normal(size=(n_pool, 3))
    pool[: n_pool // 2] += 1.5  # half the pool negative
    X = np.vstack([rng.normal(size=(n_labeled, 3)), pool])
    return X, np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_pool, dtype=int)]


def _check_png(path) -> None:
    """The PNG reads back as an image that is more than a blank canvas."""
    from matplotlib.image import imread

    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    rgb = pixels[..., :3]
    assert (rgb < 0.9).any(axis=-1).mean() > 0.01  # ink: axes, text, marks
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # colours, not one flat fill


def _check_page(report, figures: tuple[str, ...]) -> None:
    page = report.path.read_text(encoding="utf-8")
    assert page == report.html and page.startswith("<!DOCTYPE html>")
    assert set(report.figure_paths) == set(figures) == set(report.figures)
    for name, path in report.figure_paths.items():
        assert path == figure_paths(report.path)[name]
        assert path.read_bytes() == report.figures[name]
        assert f"data:image/png;base64,{base64.b64encode(report.figures[name]).decode()}" in page
        _check_png(path)
    assert page.count("<img ") == len(figures)


def test_a_table_with_the_portfolio_shows_its_choice(small_weights, tmp_path) -> None:
    X, s = _table(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0).fit(X, s)
    report = clf.plot_report(tmp_path / "report.html")
    _check_page(report, FIGURES)
    choice, prior = clf.choice_, clf.class_prior_report()
    assert choice is not None
    for text in (choice.describe(), choice.reason, prior.note, f"{prior.estimate:.4f}"):
        assert html.escape(text, quote=False) in report.html
    assert "Why the model alone" not in report.html


def test_the_model_alone_says_why_in_words(small_weights, tmp_path) -> None:
    X, s = _table(40, 160)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)
    report = clf.plot_report(tmp_path / "alone.html")
    _check_page(report, ("scores", "prior"))
    assert not figure_paths(tmp_path / "alone.html")["choice"].exists()
    assert "portfolio=&#x27;none&#x27;" not in report.html
    assert "portfolio='none' was asked" in report.html
    # below the portfolio's sizes: the counts and the sizes it needs, and no file written
    small = PUICLClassifier(weights=small_weights, device="cpu").fit(*_table(10, 50))
    drawn = small.plot_report()
    assert drawn.path is None and not drawn.figure_paths and set(drawn.figures) == {
        "scores", "prior"}
    assert ("This table has 10 labeled positives and 50 unlabeled rows; the portfolio needs "
            "at least 20 labeled positives") in drawn.html
    assert "no held-out positives" not in drawn.html  # said in the figure, not the page


def test_predict_writes_the_report(small_weights, tmp_path, capsys) -> None:
    X, s = _table(30, 120)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(s=s)
    frame.to_csv(tmp_path / "table.csv", index=False)
    page = tmp_path / "out" / "r.html"
    assert main(["predict", "--input", str(tmp_path / "table.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "scores.csv"),
                 "--report", str(page), "--no-progress"]) == 0
    assert f"wrote the report to {page}" in capsys.readouterr().err
    for name, path in figure_paths(page).items():
        assert f'<figure id="{name}">' in page.read_text(encoding="utf-8")
        _check_png(path)


def test_predict_refuses_a_report_it_cannot_draw_or_write(small_weights, tmp_path, capsys,
                                                          monkeypatch) -> None:
    table = tmp_path / "table.csv"
    pd.DataFrame({"x": np.arange(30.0), "s": np.r_[np.ones(10), np.zeros(20)]}).to_csv(table)
    base = ["predict", "--input", str(table), "--label-column", "s",
            "--weights", str(small_weights), "--report"]
    for path, message in ((table, f"is {table} (--input), which this command reads"),
                          (tmp_path, "--report " + str(tmp_path) + " is a directory")):
        assert main([*base, str(path)]) == 2
        assert message in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where the extra is missing
    assert main([*base, str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'puicl[report]'" in err
    assert not (tmp_path / "r.html").exists()


def test_a_report_refused_by_a_full_disk_leaves_no_figure(small_weights, tmp_path, capsys,
                                                           monkeypatch) -> None:
    import os

    X, s = _table(30, 120)
    pd.DataFrame(X, columns=["a", "b", "c"]).assign(s=s).to_csv(tmp_path / "t.csv", index=False)
    page = tmp_path / "full" / "r.html"
    real_fsync = os.fsync

    def full_disk(descriptor: int) -> None:  # the page's bytes find no room, the figures did
        if os.readlink(f"/proc/self/fd/{descriptor}").startswith(str(page.parent / ".r.html")):
            raise OSError(28, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full_disk)
    assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "-o", str(tmp_path / "scores.csv"),
                 "--report", str(page), "--no-progress"]) == 2
    lines = capsys.readouterr().err.splitlines()
    # (a note on the cut may come first: this small table's π is poorly identified)
    assert lines[-1] == (f"puicl predict: error: cannot write --report {page}: No space left "
                         "on device")
    assert all(line.startswith("puicl predict: note: ") for line in lines[:-1])
    assert sorted(os.listdir(page.parent)) == []
    # the API, the same: nothing of the group is left
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(X, s)
    with pytest.raises(OSError, match="No space left"):
        clf.plot_report(page)
    assert sorted(os.listdir(page.parent)) == []


def test_plot_report_refuses_a_path_through_a_missing_folder_before_drawing(
        small_weights, tmp_path, monkeypatch) -> None:
    from puicl_common.output_paths import OutputPathError

    monkeypatch.chdir(tmp_path)
    clf = PUICLClassifier(weights=small_weights, device="cpu", portfolio="none").fit(
        *_table(30, 120))
    (tmp_path / "kept.html").write_text("mine")
    with pytest.raises(OutputPathError, match=r"goes up \(\.\.\) out of nosuch"):
        clf.plot_report("nosuch/../kept.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.html"]
    assert (tmp_path / "kept.html").read_text() == "mine"
