"""The runner resumes from its per-replicate cache; the CLI writes every report."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmark import cli
from benchmark.runner import RunSpec, cache_path, plan_run, run


def _spec(data_dir, out, repeats=2):
    return RunSpec(methods=("elkan-noto", "ulsif"), datasets=("haberman",), repeats=repeats,
                   out=out, seed=5, data_dir=data_dir, jobs=1)


def _without_time(records):
    return sorted(({k: v for k, v in r.items() if k != "fit_predict_s"} for r in records),
                  key=lambda r: (r["dataset"], r["method"], r["repetition"]))


class Interrupted(Exception):
    pass


@pytest.mark.slow
def test_interrupted_run_resumes_from_cache(data_dir, tmp_path):
    reference = run(_spec(data_dir, tmp_path / "reference"), progress=False)
    assert len(reference) == 4

    spec = _spec(data_dir, tmp_path / "resumed")
    seen = []

    def stop_after_two(record):
        seen.append(record)
        if len(seen) == 2:
            raise Interrupted  # the run dies after two finished replicates

    with pytest.raises(Interrupted):
        run(spec, progress=False, on_record=stop_after_two)
    plan = plan_run(spec)
    assert len(plan.cached) == 2 and len(plan.todo) == 2

    computed = []
    resumed = run(spec, progress=False, on_record=computed.append)
    assert len(computed) == 2  # only the missing replicates ran
    assert _without_time(resumed) == _without_time(reference)
    assert len(plan_run(spec).todo) == 0


def test_corrupt_or_stale_cache_entries_are_recomputed(data_dir, tmp_path):
    spec = _spec(data_dir, tmp_path / "out", repeats=1)
    run(spec, progress=False)
    broken = cache_path(spec.out, "haberman", "ulsif", 0)
    broken.write_text("{ not json")
    stale = cache_path(spec.out, "haberman", "elkan-noto", 0)
    payload = json.loads(stale.read_text())
    payload["key"]["task_sha256"] = "0" * 64  # written for another task
    stale.write_text(json.dumps(payload))
    plan = plan_run(spec)
    assert len(plan.cached) == 0 and len(plan.todo) == 2


def test_changed_settings_invalidate_only_that_method(data_dir, tmp_path):
    spec = _spec(data_dir, tmp_path / "out", repeats=1)
    run(spec, progress=False)
    changed = RunSpec(**{**spec.__dict__, "method_overrides": {"ulsif": {"n_centres": 50}}})
    plan = plan_run(changed)
    assert [args[1] for args in plan.todo] == ["ulsif"]
    assert [r["method"] for r in plan.cached] == ["elkan-noto"]


@pytest.mark.slow
def test_cli_writes_reports_and_report_only_reuses_cache(data_dir, tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["--methods", "elkan-noto,ulsif", "--datasets", "haberman", "--repeats", "2",
            "--out", str(out), "--data-dir", str(data_dir), "--no-progress"]
    assert cli.main(argv) == 0
    frame = pd.read_csv(out / "results.csv")
    assert len(frame) == 4
    assert set(frame["method"]) == {"elkan-noto", "ulsif"}
    assert (frame[["n_labeled", "n_u_pos", "n_u_neg"]].iloc[0] == [50, 100, 60]).all()
    table = (out / "table.md").read_text()
    assert "| Haberman |" in table and "| **Average** |" in table and "**" in table
    assert (out / "auc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["root_seed"] == 0 and provenance["repeats"] == 2
    assert "haberman/haberman.data" in provenance["data_files_sha256"]
    before = (out / "results.csv").read_text()
    assert cli.main([*argv, "--report-only"]) == 0
    assert (out / "results.csv").read_text() == before  # byte-identical from the cache


def test_cli_report_only_refuses_missing_replicates(data_dir, tmp_path, capsys):
    argv = ["--methods", "ulsif", "--datasets", "haberman", "--repeats", "1", "--out",
            str(tmp_path / "empty"), "--data-dir", str(data_dir), "--report-only"]
    assert cli.main(argv) == 2
    assert "not in" in capsys.readouterr().err


def test_cli_puicl_without_weights_is_a_clear_error(data_dir, tmp_path, capsys, monkeypatch):
    import benchmark.methods.puicl as puicl_method

    monkeypatch.setattr(puicl_method, "default_weights", lambda: None)  # no bundled checkpoint
    argv = ["--methods", "puicl", "--datasets", "haberman", "--repeats", "1", "--out",
            str(tmp_path / "o"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    assert "pass --weights PATH" in capsys.readouterr().err


def test_weights_help_says_the_bundled_model_is_the_default():
    weights = next(a for a in cli.build_parser()._actions if a.dest == "weights")
    assert "required" not in weights.help and "bundled" in weights.help


def test_cli_missing_data_file_names_it(tmp_path, capsys):
    empty = tmp_path / "data"
    empty.mkdir()
    argv = ["--methods", "ulsif", "--datasets", "wdbc", "--repeats", "1", "--out",
            str(tmp_path / "o"), "--data-dir", str(empty)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "wdbc.data" in err and "breast+cancer+wisconsin+diagnostic" in err


def test_cli_unknown_method_lists_known_ones(data_dir, tmp_path, capsys):
    argv = ["--methods", "svm", "--out", str(tmp_path / "o"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    assert "unknown method svm; known: puicl, ulsif" in capsys.readouterr().err
