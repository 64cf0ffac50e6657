"""``puicl-bench --import-results``: a published results.csv seeds the cache only for the rows
that match the replicates exactly, after a recomputation agrees, and never for PUICL."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmark import cli
from benchmark.runner import RunSpec, cache_path, plan_run

METHODS = "elkan-noto,ulsif"


def _argv(data_dir, out, *extra):
    return ["--methods", METHODS, "--datasets", "haberman", "--repeats", "2", "--out", str(out),
            "--data-dir", str(data_dir), "--no-progress", *extra]


@pytest.fixture()
def published(data_dir, tmp_path):
    out = tmp_path / "published"
    assert cli.main(_argv(data_dir, out)) == 0
    return out / "results.csv"


def _metrics(path):
    frame = pd.read_csv(path).drop(columns="fit_predict_s")
    return frame.sort_values(["method", "repetition"]).reset_index(drop=True)


def test_matching_rows_are_imported_after_a_check(data_dir, tmp_path, published, capsys):
    out = tmp_path / "new"
    assert cli.main(_argv(data_dir, out, "--import-results", str(published))) == 0
    err = capsys.readouterr().err
    # one replicate per method recomputed (and cached as computed), the other one imported
    assert err.count("import check:") == 2
    assert f"imported 2 replicates from {published}" in err
    assert "4 from cache, 0 computed" in err  # 2 checked, 2 imported
    pd.testing.assert_frame_equal(_metrics(out / "results.csv"), _metrics(published))
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["imported_replicates"] == {str(published): {"elkan-noto": 1, "ulsif": 1}}


def test_a_disagreeing_row_refuses_the_whole_import(data_dir, tmp_path, published, capsys):
    frame = pd.read_csv(published)
    frame["auc"] = frame["auc"] - 0.01  # every published AUC is off
    tampered = tmp_path / "tampered.csv"
    frame.to_csv(tampered, index=False)
    out = tmp_path / "new"
    spec = RunSpec(methods=("elkan-noto", "ulsif"), datasets=("haberman",), repeats=2, out=out,
                   data_dir=data_dir)
    assert cli.main(_argv(data_dir, out, "--import-results", str(tampered))) == 2
    err = capsys.readouterr().err
    assert "elkan-noto on haberman" in err and "nothing was imported" in err
    cached = plan_run(spec).cached
    assert all("imported_from" not in record for record in cached)
    assert len(cached) == 1  # only the recomputed check replicate


def test_other_tasks_and_puicl_are_never_imported(data_dir, tmp_path, published, capsys):
    out = tmp_path / "other_seed"
    # another root seed: other tasks (sha256) and seeds, so nothing matches
    assert cli.main(_argv(data_dir, out, "--seed", "1", "--import-results", str(published))) == 0
    assert "imported 0 replicates" in capsys.readouterr().err

    frame = pd.read_csv(published)
    frame.loc[frame["method"] == "ulsif", "method"] = "puicl"  # rows that claim to be PUICL's
    claims = tmp_path / "claims.csv"
    frame.to_csv(claims, index=False)
    spec = RunSpec(methods=("puicl",), datasets=("haberman",), repeats=2,
                   out=tmp_path / "puicl", data_dir=data_dir, import_results=claims)
    from benchmark.runner import import_published

    summary = import_published(spec)
    assert summary.imported == 0 and summary.verified == ()
    assert summary.skipped_methods == ("puicl",)
    assert not cache_path(spec.out, "haberman", "puicl", 0).exists()


def test_a_missing_or_foreign_csv_is_a_clear_error(data_dir, tmp_path, capsys):
    missing = tmp_path / "nowhere.csv"
    assert cli.main(_argv(data_dir, tmp_path / "o", "--import-results", str(missing))) == 2
    assert f"--import-results: no file at {missing}" in capsys.readouterr().err
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("dataset,method,auc\nhaberman,ulsif,0.7\n")
    assert cli.main(_argv(data_dir, tmp_path / "o", "--import-results", str(foreign))) == 2
    assert "is not a puicl-bench results.csv: it lacks the column(s) task_sha256" \
        in capsys.readouterr().err
