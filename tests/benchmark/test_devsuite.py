"""The development suite (``puicl-bench --suite dev``): its tables load as the manifest
describes them, runs over several π write per-π reports and the suite's figure, and bad
suites and arguments are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark import cli
from benchmark.datasets import DataError
from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.summary import (
    paired_difference,
    per_table_frame,
    suite_figure,
    summary_markdown,
)

SHARED_SUITE = Path(__file__).resolve().parents[2].parent / "shared" / "devsuite"


@pytest.fixture
def suite_dir(tmp_path: Path, suite_writer) -> Path:
    return suite_writer(tmp_path / "devsuite", {"alpha": (90, 60), "beta": (120, 40)})


def test_text_columns_are_categories_and_empty_cells_a_category_of_their_own(suite_dir):
    data = load_devsuite_table("alpha", suite_dir)
    assert data.categorical == (False, True, False)
    assert data.feature_names == ("signal", "colour", "count")
    codes = data.X[:, 1]
    # blue, green, red in sorted order, then the empty cell last
    assert set(np.unique(codes)) == {0.0, 1.0, 2.0, 3.0}
    assert (codes[::7] == 3.0).all()
    assert np.isnan(data.X[::11, 0]).all() and not np.isnan(data.X[:, 1]).any()
    assert (data.n_positive, data.n_negative) == (90, 60)


def test_bad_suites_are_named_in_one_line(suite_dir, tmp_path):
    with pytest.raises(DataError, match=r"needs a manifest\.csv"):
        devsuite_slugs(tmp_path)
    with pytest.raises(DataError, match="unknown development-suite table 'gamma'"):
        load_devsuite_table("gamma", suite_dir)
    frame = pd.read_csv(suite_dir / "beta.csv")
    frame["target"] = 1 - frame["target"]
    frame.to_csv(suite_dir / "beta.csv", index=False)
    with pytest.raises(DataError, match="not the majority"):
        load_devsuite_table("beta", suite_dir)
    frame.drop(columns="target").to_csv(suite_dir / "beta.csv", index=False)
    with pytest.raises(DataError, match="has no 'target' column"):
        load_devsuite_table("beta", suite_dir)
    frame.assign(target=1).to_csv(suite_dir / "beta.csv", index=False)
    with pytest.raises(DataError, match="'target' holds one class only"):
        load_devsuite_table("beta", suite_dir)


def test_a_table_with_a_header_only_is_one_line(suite_dir):
    frame = pd.read_csv(suite_dir / "beta.csv")
    frame.iloc[:0].to_csv(suite_dir / "beta.csv", index=False)
    with pytest.raises(DataError, match="holds a header and no rows") as refused:
        load_devsuite_table("beta", suite_dir)
    assert len(str(refused.value).splitlines()) == 1


@pytest.mark.parametrize("slugs, message", [
    ([], "lists no table"),
    (["alpha", "be|ta"], "'be|ta'"),
    (["alpha", "be\nta"], "'be\\nta'"),
    (["alpha", "be\x00ta"], "'be\\x00ta'"),
])
def test_a_manifest_without_tables_or_with_unprintable_slugs_is_refused_before_any_report(
        suite_dir, tmp_path, capsys, slugs, message):
    pd.DataFrame({"slug": slugs}, dtype=str).to_csv(suite_dir / "manifest.csv", index=False)
    out = tmp_path / "run"
    argv = ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
            "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_dev_run_over_three_pi_writes_each_report_and_the_suite_figure(suite_dir, tmp_path):
    out = tmp_path / "run"
    argv = ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto,ulsif",
            "--repeats", "2", "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    frames = {}
    for pi in (0.2, 0.5, 0.8):
        folder = out / f"pi_{pi:g}"
        frames[pi] = pd.read_csv(folder / "results.csv")
        assert len(frames[pi]) == 2 * 2 * 2  # tables x repetitions x methods
        assert json.loads((folder / "provenance.json").read_text())["suite"] == "dev"
        table = (folder / "table.md").read_text()
        assert "| alpha |" in table and "paper" not in table.lower()
    per_table = pd.read_csv(out / "per_table.csv")
    assert len(per_table) == 2 * 2 * 3
    # the figure: the mean over tables of each table's mean over repetitions and π
    everything = pd.concat(frames.values())
    ulsif = everything[everything["method"] == "ulsif"]
    expected = ulsif.groupby("dataset")["auc"].mean().mean()
    mean, se = suite_figure(per_table, "ulsif")
    assert mean == pytest.approx(expected, abs=1e-5)
    by_table = ulsif.groupby("dataset")["auc"].mean()
    assert se == pytest.approx(by_table.std(ddof=1) / np.sqrt(2), abs=1e-5)
    summary = (out / "summary.md").read_text()
    assert f"**{mean:.4f} ± {se:.4f}**" in summary
    assert (out / "summary.png").stat().st_size > 0
    # a rerun computes nothing: every replicate comes from the per-π caches
    assert cli.main([*argv, "--report-only"]) == 0


def test_paired_difference_is_the_mean_of_per_table_differences():
    frame = pd.DataFrame({
        "dataset": ["a", "a", "b", "b", "c", "c"], "method": ["m", "r"] * 3,
        "repetition": 0, "pi_true": 0.5, "auc": [0.9, 0.8, 0.7, 0.7, 0.6, 0.3],
        "accuracy": 0.5, "f1": 0.5, "pi_abs_error": None,
    })
    per_table = per_table_frame({0.5: frame})
    diff, se = paired_difference(per_table, "m", "r")
    assert diff == pytest.approx((0.1 + 0.0 + 0.3) / 3)
    assert se == pytest.approx(np.std([0.1, 0.0, 0.3], ddof=1) / np.sqrt(3))
    header = summary_markdown(per_table, ["r", "m"]).splitlines()[0]
    assert "π̂" in header and header.endswith("| Δ AUC vs r |")
    assert "π̂" not in summary_markdown(per_table, ["r", "m"], pi_hat=False).splitlines()[0]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--pi", "0.2,1.2", "--pi must be in [0, 1), got 1.2"),
    ("--pi", "0.2,0.2", "--pi: 0.2 is given twice"),
    ("--pi", "half", "--pi: 'half' is not a number"),
    ("--max-positives", "2", "--max-positives must be from 3 to 2147483647 or 'all', got 2"),
    ("--max-positives", "many",
     "--max-positives must be a whole number >= 3 or 'all', got 'many'"),
    ("--max-positives", "1e3", "--max-positives must be a whole number >= 3 or 'all', got '1e3'"),
])
def test_bad_pi_lists_and_caps_are_refused(suite_dir, tmp_path, capsys, option, value, message):
    argv = ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
            option, value, "--out", str(tmp_path / "x")]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == f"puicl-bench: error: {message}"
    assert not (tmp_path / "x").exists()


def test_out_that_is_a_file_is_refused_in_one_line(suite_dir, tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    argv = ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
            "--out", str(target)]
    assert cli.main(argv) == 2
    assert "is a file; give a folder" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def test_unknown_table_of_the_suite_is_refused(suite_dir, tmp_path, capsys):
    argv = ["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
            "--datasets", "alpha,haberman", "--out", str(tmp_path / "x")]
    assert cli.main(argv) == 2
    assert "unknown dataset haberman; known: alpha, beta" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED_SUITE / "manifest.csv").is_file(),
                    reason="the development suite is not next to the repository")
def test_every_table_of_the_shared_suite_loads_as_its_manifest_describes():
    manifest = pd.read_csv(SHARED_SUITE / "manifest.csv")
    assert devsuite_slugs(SHARED_SUITE) == tuple(manifest["slug"])
    for row in manifest.itertuples():
        data = load_devsuite_table(row.slug, SHARED_SUITE)
        assert data.X.shape == (row.rows, row.features), row.slug
        assert sum(data.categorical) == row.categorical_features, row.slug
        assert data.n_positive > data.n_negative >= 50, row.slug


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00\x01\x89PNG binary"],
                         ids=["empty", "binary"])
def test_an_empty_or_binary_manifest_is_named_in_one_line(suite_dir, tmp_path, capsys,
                                                          content):
    manifest = suite_dir / "manifest.csv"
    manifest.write_bytes(content)
    with pytest.raises(DataError) as refused:
        devsuite_slugs(suite_dir)
    message = str(refused.value)
    assert message.startswith(f"{manifest} is not a readable CSV manifest (")
    assert "\n" not in message
    out = tmp_path / "run"
    assert cli.main(["--suite", "dev", "--data-dir", str(suite_dir), "--methods", "elkan-noto",
                     "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{manifest} is not a readable CSV manifest" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("cell", ["inf", "-inf"])
def test_an_infinite_cell_names_the_table_and_the_column(suite_dir, cell):
    path = suite_dir / "beta.csv"
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[5].split(",")
    row[header.index("count")] = cell
    lines[5] = ",".join(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as refused:
        load_devsuite_table("beta", suite_dir)
    assert str(refused.value) == (
        f"development-suite table 'beta': column 'count' of {path} holds an infinite value "
        "(line 6); replace it with a finite number or leave the cell empty (missing)")
