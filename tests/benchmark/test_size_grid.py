"""Tasks of every size: ``puicl-bench --max-positives`` and the size grid
(``benchmark.size_grid``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark import cli, size_grid
from benchmark.protocol import (
    EVERY_ROW,
    composition,
    make_task,
    parse_label_frequency,
    parse_max_positives,
)


@pytest.fixture
def suite_dir(tmp_path: Path, suite_writer) -> Path:
    return suite_writer(tmp_path / "devsuite", {"alpha": (300, 120), "beta": (240, 90)},
                       with_gaps=False)


def test_a_larger_cap_draws_more_positives_and_all_draws_every_one() -> None:
    assert composition(5000, 3000, max_positives=600) == (200, 400, 400)
    assert composition(5000, 3000, max_positives=3000) == (1000, 2000, 2000)
    # every positive; the negatives run out before π = 0.5 is reached
    assert composition(5000, 3000, max_positives=EVERY_ROW) == (1666, 3334, 3000)
    assert parse_max_positives("all") == EVERY_ROW == parse_max_positives(" ALL ")
    assert parse_max_positives("3000") == 3000


def test_the_cap_reaches_the_tasks_the_report_and_the_provenance(suite_dir, tmp_path):
    def args(cap: str, out: Path) -> list[str]:
        return ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
                "--repeats", "1", "--pi", "0.2", "--max-positives", cap, "--out", str(out),
                "--no-progress"]

    out = tmp_path / "run"
    assert cli.main(args("all", out)) == 0
    rows = pd.read_csv(out / "results.csv").set_index("dataset")
    # alpha: 300 positives, 100 labeled; beta: 240 positives, 80 labeled (600 would cap none,
    # so "all" and 600 give the same composition here, and 150 caps both)
    assert (rows.loc["alpha", "n_labeled"], rows.loc["beta", "n_labeled"]) == (100, 80)
    assert json.loads((out / "provenance.json").read_text())["max_positives"] == EVERY_ROW
    assert "every positive of each table" in (out / "table.md").read_text()
    capped = tmp_path / "capped"
    assert cli.main(args("150", capped)) == 0
    assert "at most 150 positives per task" in (capped / "table.md").read_text()
    assert set(pd.read_csv(capped / "results.csv")["n_labeled"]) == {50}


def test_the_grid_writes_its_cells_differences_and_figure(suite_dir, tmp_path):
    out = tmp_path / "grid"
    argv = ["--out", str(out), "--data-dir", str(suite_dir), "--sizes", "150,all",
            "--pi", "0.2,0.5", "--methods", "elkan-noto,ulsif", "--no-progress"]
    assert size_grid.main(argv) == 0
    frame = pd.read_csv(out / "grid.csv")
    assert len(frame) == 2 * 2 * 2 * 2  # tables x caps x π x methods
    assert set(frame["max_positives"]) == {150, EVERY_ROW}
    assert set(frame.loc[frame["max_positives"] == 150, "n_labeled"]) == {50}
    text = (out / "grid.md").read_text()
    # one row per cell; the first method minus the better of the others, paired by table
    cell = frame[(frame["max_positives"] == 150) & (frame["pi_target"] == 0.5)]
    table = cell.pivot_table(index="dataset", columns="method", values="auc")
    diff = table["elkan-noto"] - table["ulsif"]
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    assert "| 150 | π = 0.5 | 50 |" in text
    assert f"{diff.mean():+.4f} ± {se:.4f} (ulsif)" in text
    assert "| every |" in text
    assert (out / "grid.png").stat().st_size > 0
    # a rerun reads every replicate from the cells' caches
    assert size_grid.main(argv) == 0
    assert pd.read_csv(out / "grid.csv").equals(frame)


def test_a_label_frequency_labels_that_share_and_pools_every_other_row(suite_writer,
                                                                       tmp_path) -> None:
    assert composition(5000, 3000, max_positives=EVERY_ROW, label_frequency=0.05) == (
        250, 4750, 3000)
    assert composition(5000, 3000, max_positives=600, label_frequency=0.2) == (120, 480, 3000)
    assert composition(10, 3, label_frequency=0.01) == (1, 9, 3)  # at least one labeled
    assert parse_label_frequency("0.05") == 0.05
    for bad in ("0", "1", "-0.1", "lots"):
        with pytest.raises(ValueError, match="--label-frequency"):
            parse_label_frequency(bad)
    from benchmark.devsuite import load_devsuite_table

    folder = suite_writer(tmp_path / "suite", {"alpha": (300, 120)}, with_gaps=False)
    table = load_devsuite_table("alpha", folder)
    task = make_task(table, 0, 0, max_positives=EVERY_ROW, label_frequency=0.1)
    assert (task.n_labeled, task.n_u_pos, task.n_u_neg) == (30, 270, 120)
    assert np.array_equal(task.X, make_task(table, 0, 0, max_positives=EVERY_ROW,
                                            label_frequency=0.1).X)
    # without a label frequency the task is the paper's, byte for byte as before
    assert make_task(table, 0, 0).fingerprint() == make_task(table, 0, 0, target_pi=0.5,
                                                             label_frequency=None).fingerprint()


def test_the_grid_judges_each_task_against_its_best_baseline(suite_dir, tmp_path):
    out = tmp_path / "grid"
    argv = ["--out", str(out), "--data-dir", str(suite_dir), "--cells", "all:0.5,all:c0.1",
            "--methods", "elkan-noto,ulsif,pu-bagging",
            "--no-progress"]
    assert size_grid.main(argv) == 0
    frame = pd.read_csv(out / "grid.csv")
    frequency = frame[frame["label_frequency"] == 0.1]
    assert frequency["pi_target"].isna().all() and len(frequency) == 2 * 3
    assert set(frequency["n_labeled"]) == {30, 24}  # a tenth of 300 and of 240 positives
    cell = frame[frame["pi_target"] == 0.5]
    per_task = cell.pivot_table(index="dataset", columns="method", values="auc")
    gap = per_task["elkan-noto"] - per_task[["ulsif", "pu-bagging"]].max(axis=1)
    text = (out / "grid.md").read_text()
    assert "against the per-task best baseline" in text
    row = next(line for line in text.splitlines()
           if line.startswith("| every | π = 0.5 | 2 |"))
    assert f"{gap.mean():+.4f}" in row and f"{(gap < -0.02).mean():.0%}" in row
    assert f"{gap.min():+.3f} ({gap.idxmin()})" in row
    assert "| every | c = 0.1 |" in text
    assert (out / "per_task.png").stat().st_size > 0


def test_cells_name_a_cap_with_a_pi_or_a_label_frequency() -> None:
    assert size_grid.parse_cell("600:0.2") == (600, 0.2, None)
    assert size_grid.parse_cell(" all:c0.05") == (EVERY_ROW, 0.5, 0.05)
    for bad in ("600", "lots:0.2", "600:1.5", "all:c2"):
        with pytest.raises(ValueError):
            size_grid.parse_cell(bad)


def test_the_grid_refuses_bad_arguments_in_one_line(suite_dir, tmp_path, capsys):
    base = ["--out", str(tmp_path / "g"), "--data-dir", str(suite_dir), "--methods",
            "elkan-noto"]
    assert size_grid.main([*base, "--pi", "1.5"]) == 2
    assert "size_grid: error: --pi must be in [0, 1), got 1.5" in capsys.readouterr().err
    assert size_grid.main([*base, "--sizes", "600,lots"]) == 2
    assert "--max-positives must be a whole number" in capsys.readouterr().err
    assert size_grid.main([*base, "--methods", "nope"]) == 2
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("where", ["below a file", "read-only"])
def test_an_out_that_cannot_be_written_is_one_line(suite_dir, tmp_path, capsys, where,
                                                   request):
    if where == "below a file":
        (tmp_path / "a_file").write_text("x")
        out = tmp_path / "a_file" / "run"
    else:
        out = request.getfixturevalue("read_only_place")
    args = ["--data-dir", str(suite_dir), "--methods", "elkan-noto", "--out", str(out),
            "--no-progress"]
    for run, name in ((lambda: cli.main(["--suite", "dev", "--pi", "0.5", *args]),
                       "puicl-bench"),
                      (lambda: size_grid.main(["--sizes", "150", "--pi", "0.5", *args]),
                       "size_grid")):
        assert run() == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"{name}: error: "), err
        assert str(out) in err[0]


def test_baselines_of_an_earlier_grid_join_a_new_run_of_the_same_tasks(suite_dir, tmp_path,
                                                                        capsys):
    first = tmp_path / "first"
    cells = ["--data-dir", str(suite_dir), "--cells", "150:0.5,all:c0.1", "--no-progress"]
    assert size_grid.main(["--out", str(first), "--methods", "elkan-noto,ulsif", *cells]) == 0
    earlier = pd.read_csv(first / "grid.csv")
    again = tmp_path / "again"
    assert size_grid.main(["--out", str(again), "--methods", "elkan-noto", *cells,
                           "--baselines", str(first / "grid.csv")]) == 0
    joined = pd.read_csv(again / "grid.csv")
    order = ["method", "dataset", "max_positives", "label_frequency"]
    pd.testing.assert_frame_equal(  # elkan-noto ran again: all but its seconds are equal
        joined.sort_values(order).reset_index(drop=True).drop(columns="fit_predict_s"),
        earlier.sort_values(order).reset_index(drop=True).drop(columns="fit_predict_s"))
    tables = [(folder / "grid.md").read_text().split("### Seconds")[0]
              for folder in (first, again)]
    assert tables[0] == tables[1] and "(ulsif)" in tables[1]
    # another task under the same table and cell is refused, and nothing is written
    earlier.loc[earlier["method"] == "ulsif", "n_labeled"] += 1
    earlier.to_csv(tmp_path / "other.csv", index=False)
    third = tmp_path / "third"
    assert size_grid.main(["--out", str(third), "--methods", "elkan-noto", *cells,
                           "--baselines", str(tmp_path / "other.csv")]) == 2
    assert "another task" in capsys.readouterr().err and not (third / "grid.md").exists()
