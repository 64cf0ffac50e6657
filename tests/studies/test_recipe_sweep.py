"""studies/recipe_sweep.py's yardstick: the development suite at three π, never the
benchmark; a plan's ``dev_settings`` reach ``puicl-bench`` as its ``--method-config``; the
table reports each variant's paired difference from the base next to the measured seed noise;
a plan's ``dev_labelings`` score the suite again under biased labelings, also for variants
trained before (``--rescore``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from puicl_common.configio import ConfigError
from studies import recipe_sweep
from trainer.config import run_config_from_mapping

ROOT = Path(__file__).resolve().parents[2]


def _fake_bench(calls: list[list[str]]):
    """Stands in for running ``puicl-bench``: records the command, writes a per-table CSV
    (0.1 lower under a biased labeling, so that its figures are told apart)."""

    def run(command: list[str], log: Path) -> float:
        calls.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        shift = 0.1 if "--labeling" in command else 0.0
        pd.DataFrame({"dataset": ["a", "a", "b", "b"], "method": "puicl",
                      "pi_target": [0.2, 0.8, 0.2, 0.8],
                      "auc": [0.6 - shift, 0.8 - shift, 0.9 - shift, 0.9 - shift]}).to_csv(
            out / "per_table.csv", index=False)
        return 0.0

    return run


def test_the_yardstick_is_the_dev_suite_at_three_pi(tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    dev = recipe_sweep.dev_suite_score(tmp_path / "w", tmp_path, {"n_estimators": 1})
    assert dev["dev_per_table"] == {"a": 0.7, "b": 0.9} and abs(dev["dev_auc"] - 0.8) < 1e-12
    assert dev["dev_by_pi"] == {"0.2": 0.75, "0.8": 0.85}
    command = calls[0]
    assert command[command.index("--suite") + 1] == "dev"
    assert "--pi" not in command  # the suite's default: 0.2, 0.5 and 0.8
    assert "--datasets" not in command  # every table of the suite
    settings = Path(command[command.index("--method-config") + 1])
    assert yaml.safe_load(settings.read_text()) == {"puicl": {"n_estimators": 1}}


def test_without_dev_settings_the_classifier_defaults_are_used(tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    recipe_sweep.dev_suite_score(tmp_path / "w", tmp_path)
    assert "--method-config" not in calls[0]


def _row(name: str, per_table: dict[str, float], by_pi: dict[str, float] | None = None) -> dict:
    values = list(per_table.values())
    return {"variant": name, "parameters": 1, "steps": 1, "tasks": 16,
            "train_cpu_minutes": 1.0, "val_auc": 0.8, "dev_auc": sum(values) / len(values),
            "dev_se": 0.01, "dev_per_table": per_table,
            "dev_by_pi": by_pi or {"0.2": 0.7, "0.5": 0.8, "0.8": 0.9}}


def test_table_reports_paired_differences_with_the_seed_noise() -> None:
    plan = {"noise": ["base", "base_seed1"]}
    rows = [_row("base", {"a": 0.70, "b": 0.80, "c": 0.90}),
            _row("base_seed1", {"a": 0.71, "b": 0.80, "c": 0.90}),
            _row("lever", {"a": 0.72, "b": 0.84, "c": 0.90},
                 {"0.2": 0.69, "0.5": 0.83, "0.8": 0.9})]
    noise = recipe_sweep.seed_noise(plan, rows)
    assert abs(noise - 0.01 / 3) < 1e-12
    text = recipe_sweep.table(rows, "base", noise)
    assert f"seed noise {noise:.4f}" in text
    lever = next(line for line in text.splitlines() if line.startswith("| lever "))
    diffs = np.array([0.02, 0.04, 0.0])
    assert f"{diffs.mean():+.4f} ± {diffs.std(ddof=1) / np.sqrt(3):.4f}" in lever
    # and what it wins or loses at each π
    assert lever.endswith("| -0.0100 / +0.0300 / +0.0000 |")
    # a summary from before the suite was the yardstick has no figure to compare
    old = {**_row("old", {"a": 0.5}), "dev_auc": None}
    del old["dev_auc"], old["dev_se"], old["dev_per_table"]
    assert recipe_sweep.seed_noise({"noise": ["base", "old"]}, [*rows, old]) is None
    assert recipe_sweep.table([*rows, old], "base", None).splitlines()[-1].endswith("| – | – | – |")


def test_the_prior_study_plan_measures_its_noise_with_two_seeds_of_its_base() -> None:
    plan = recipe_sweep.load_plan(ROOT / "configs" / "prior_study" / "plan.yaml")
    first, second = plan["noise"]
    assert first == plan["base_variant"]
    assert plan["variants"][second]["set"] == {"seed": 1}
    assert recipe_sweep.variant_steps(plan, first) * 16 == 40_000


def test_the_recipe_study_plan_scores_with_the_single_pass() -> None:
    plan = recipe_sweep.load_plan(ROOT / "configs" / "recipe_study" / "plan.yaml")
    assert plan["dev_settings"] == {"n_estimators": 1}


def test_a_variant_starts_from_the_resolved_base(tmp_path) -> None:
    """The plan's base extends another config: the variant holds the merged sections, no
    ``extends``, and its prior is the trainer's reading of the base."""
    from trainer.config import load_run_config, run_config_from_mapping

    plan = recipe_sweep.load_plan(ROOT / "configs" / "prior_study" / "plan.yaml")
    config = recipe_sweep.variant_config(plan, "v1_prior_seed1")
    assert "extends" not in config and config["seed"] == 1
    variant = run_config_from_mapping(config)
    base = load_run_config(ROOT / plan["base"])
    assert (variant.prior, variant.model) == (base.prior, base.model)
    assert variant.training.phase1.peak_lr == base.training.phase1.peak_lr == 0.003


def test_a_time_limited_segment_stops_before_scoring_and_its_cost_is_kept(
        tmp_path, monkeypatch) -> None:
    """A segment that ends before the last step returns no summary (nothing is scored from a
    half-trained run), and every segment's CPU time is charged to the variant."""
    plan = {"base": "configs/puicl_v1.yaml", "budget_steps": 40, "variants": {"a": {}}}
    steps_written: list[int] = []

    def fake_run(command: list[str], log: Path) -> float:
        assert command[command.index("--time-limit") + 1] == "5"
        run_dir = Path(command[command.index("--run-dir") + 1])
        (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        step = 10 * (len(steps_written) + 1)
        steps_written.append(step)
        (run_dir / "checkpoints" / f"step_{step:08d}.pt").write_bytes(b"")
        return 60.0

    monkeypatch.setattr(recipe_sweep, "run", fake_run)
    monkeypatch.setattr(recipe_sweep, "generate_shards", lambda *a: tmp_path / "shards")
    assert recipe_sweep.train_variant(plan, "a", tmp_path, 1, time_limit=5) is None
    assert recipe_sweep.train_variant(plan, "a", tmp_path, 1, time_limit=5) is None
    ledger = json.loads((tmp_path / "a" / "segments.json").read_text())
    assert [s["until_step"] for s in ledger] == [10, 20]
    assert sum(s["cpu_s"] for s in ledger) == 120.0


# ------------------------------------------------------------- biased-labeling yardstick ---
def _fake_training(monkeypatch, tmp_path: Path, calls: list[list[str]]) -> None:
    """Stands in for everything of ``train_variant`` but the dev-suite scoring: training writes
    its last checkpoint, export a weights folder, the validation split scores a constant."""
    bench = _fake_bench(calls)

    def fake_run(command: list[str], log: Path) -> float:
        if command[0].endswith("puicl-bench"):
            return bench(command, log)
        if "trainer/main.py" in command:
            checkpoints = Path(command[command.index("--run-dir") + 1]) / "checkpoints"
            checkpoints.mkdir(parents=True, exist_ok=True)
            (checkpoints / "step_00000040.pt").write_bytes(b"")
        else:  # trainer export RUN --out WEIGHTS
            Path(command[command.index("--out") + 1]).mkdir(parents=True, exist_ok=True)
        return 60.0

    monkeypatch.setattr(recipe_sweep, "run", fake_run)
    monkeypatch.setattr(recipe_sweep, "generate_shards", lambda *a: tmp_path / "shards")
    monkeypatch.setattr(recipe_sweep, "load_fixed_val", lambda directory: [])
    monkeypatch.setattr(recipe_sweep, "exported_model",
                        lambda run_dir, step: (torch.nn.Linear(2, 1), ""))
    monkeypatch.setattr(recipe_sweep, "val_scores", lambda model, tasks: {
        "val_auc": 0.8, "val_accuracy": 0.7, "val_loss": 0.5})


def _plan(**extra) -> dict:
    return {"base": "configs/puicl_v1.yaml", "budget_steps": 40, "variants": {"a": {}},
            "dev_settings": {"n_estimators": 1}, "dev_repeats": 3, **extra}


def test_without_dev_labelings_a_variant_is_scored_under_scar_only(tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    _fake_training(monkeypatch, tmp_path, calls)
    summary = recipe_sweep.train_variant(_plan(), "a", tmp_path, 1)
    assert len(calls) == 1 and "--labeling" not in calls[0]
    assert Path(calls[0][calls[0].index("--out") + 1]) == tmp_path / "a" / "dev_suite"
    assert "dev_by_labeling" not in summary
    assert "dev_by_labeling" not in json.loads((tmp_path / "a" / "summary.json").read_text())


def test_dev_labelings_score_the_same_suite_again_under_each_mechanism(
        tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    _fake_training(monkeypatch, tmp_path, calls)
    plan = _plan(dev_labelings=["sar-linear", "sar-top"])
    summary = recipe_sweep.train_variant(plan, "a", tmp_path, 1)
    scar, *biased = calls
    assert "--labeling" not in scar and scar[scar.index("--out") + 1].endswith("dev_suite")
    assert [c[c.index("--labeling") + 1] for c in biased] == ["sar-linear", "sar-top"]
    for command, labeling in zip(biased, ["sar-linear", "sar-top"], strict=True):
        out = Path(command[command.index("--out") + 1])
        assert out == tmp_path / "a" / f"dev_suite_{labeling}"
        # the same π (the suite's), repetitions and classifier settings as the SCAR figure
        assert "--pi" not in command
        assert command[command.index("--repeats") + 1] == "3"
        settings = Path(command[command.index("--method-config") + 1])
        assert yaml.safe_load(settings.read_text()) == {"puicl": {"n_estimators": 1}}
    stored = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert stored["dev_by_labeling"] == summary["dev_by_labeling"]
    sar = stored["dev_by_labeling"]["sar-linear"]
    assert set(sar) == {"dev_auc", "dev_se", "dev_by_pi", "dev_per_table"}
    assert sar["dev_per_table"] == {"a": 0.6, "b": 0.8} and abs(sar["dev_auc"] - 0.7) < 1e-12
    assert stored["dev_per_table"] == {"a": 0.7, "b": 0.9}  # SCAR's own figure unchanged


def _scored_before(tmp_path: Path) -> dict:
    """A variant trained and scored before its plan listed dev_labelings."""
    summary = {"variant": "a", "dev_auc": 0.8, "dev_se": 0.1, "dev_by_pi": {"0.2": 0.75},
               "dev_per_table": {"a": 0.7, "b": 0.9}, "dev_settings": {"n_estimators": 1},
               "val_auc": 0.8, "curve": [{"step": 40, "val_auc": 0.8}], "date": "2026-11-24"}
    (tmp_path / "a" / "weights").mkdir(parents=True)
    (tmp_path / "a" / "summary.json").write_text(json.dumps(summary))
    return summary


def test_rescore_adds_the_missing_labelings_and_touches_nothing_else(
        tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    before = _scored_before(tmp_path)
    plan_path = tmp_path / "plan.yaml"
    # today's plan scores with other settings: the variant keeps the ones of its SCAR figure
    plan_path.write_text(yaml.safe_dump({**_plan(dev_labelings=["sar-linear"]),
                                         "dev_settings": {"n_estimators": 4}}))
    assert recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path),
                              "--rescore", "a"]) == 0
    command, = calls
    assert command[command.index("--labeling") + 1] == "sar-linear"
    assert command[command.index("--weights") + 1] == str(tmp_path / "a" / "weights")
    settings = Path(command[command.index("--method-config") + 1])
    assert yaml.safe_load(settings.read_text()) == {"puicl": {"n_estimators": 1}}
    after = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert after.pop("dev_by_labeling")["sar-linear"]["dev_per_table"] == {"a": 0.6, "b": 0.8}
    assert after == before
    # a second mechanism later: only it is scored, the first kept as it was
    first = json.loads((tmp_path / "a" / "summary.json").read_text())["dev_by_labeling"]
    plan_path.write_text(yaml.safe_dump(_plan(dev_labelings=["sar-linear", "sar-posterior"])))
    recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--rescore", "a"])
    assert [c[c.index("--labeling") + 1] for c in calls[1:]] == ["sar-posterior"]
    by_labeling = json.loads((tmp_path / "a" / "summary.json").read_text())["dev_by_labeling"]
    assert by_labeling["sar-linear"] == first["sar-linear"] and "sar-posterior" in by_labeling
    # nothing missing: nothing run, the file's bytes kept
    text = (tmp_path / "a" / "summary.json").read_bytes()
    recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--rescore", "a"])
    assert len(calls) == 2 and (tmp_path / "a" / "summary.json").read_bytes() == text


def test_rescore_needs_a_trained_variant_and_a_plan_with_dev_labelings(
        tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench([]))
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(_plan(dev_labelings=["sar-top"])))
    with pytest.raises(SystemExit, match=r"no .*summary\.json; train and score the variant"):
        recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--rescore", "a"])
    plan_path.write_text(yaml.safe_dump(_plan()))
    _scored_before(tmp_path)
    with pytest.raises(SystemExit):
        recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--rescore", "a"])
    assert "lists no dev_labelings" in capsys.readouterr().err


@pytest.mark.parametrize("labelings, message", [
    (["sar-foo"], "unknown mechanism 'sar-foo'"),
    (["scar"], "'scar' is always scored"),
    (["sar-top", "sar-top"], "names a mechanism twice"),
    ("sar-top", "must be a list"),
])
def test_a_bad_dev_labelings_is_named(tmp_path, labelings, message) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(_plan(dev_labelings=labelings)))
    with pytest.raises(SystemExit, match=f"dev_labelings.*{message}"):
        recipe_sweep.load_plan(path)


def test_the_table_reports_each_labeling_paired_against_the_base() -> None:
    plan = {"variants": {"base": {}, "base_seed1": {}, "lever": {}},
            "noise": ["base", "base_seed1"]}
    rows = [_row("base", {"a": 0.70, "b": 0.80, "c": 0.90}),
            _row("base_seed1", {"a": 0.71, "b": 0.80, "c": 0.90}),
            _row("lever", {"a": 0.72, "b": 0.84, "c": 0.90})]
    scar_only = recipe_sweep.tables(plan, rows)
    assert scar_only == recipe_sweep.table(rows, "base", recipe_sweep.seed_noise(plan, rows))
    # under sar-linear the lever wins more, and the base's seeds differ by more
    for row, per_table in zip(rows, [{"a": 0.60, "b": 0.70, "c": 0.80},
                                     {"a": 0.60, "b": 0.73, "c": 0.80},
                                     {"a": 0.66, "b": 0.78, "c": 0.83}], strict=True):
        biased = _row(row["variant"], per_table, {"0.2": 0.6, "0.5": 0.7, "0.8": 0.8})
        row["dev_by_labeling"] = {"sar-linear": {k: biased[k] for k in recipe_sweep.DEV_FIELDS}}
    text = recipe_sweep.tables(plan, rows)
    assert text.startswith(scar_only + "\n\n")  # the SCAR table first, as before
    biased_table = text[len(scar_only):]
    assert "`sar-linear`" in biased_table and "dev-suite sar-linear AUC ± SE" in biased_table
    assert f"seed noise {0.01:.4f}" in biased_table
    lever = next(line for line in biased_table.splitlines() if line.startswith("| lever "))
    diffs = np.array([0.06, 0.08, 0.03])
    assert f"{diffs.mean():+.4f} ± {diffs.std(ddof=1) / np.sqrt(3):.4f}" in lever
    assert f"| {np.mean([0.66, 0.78, 0.83]):.4f} ± 0.0100 |" in lever
    # a variant not scored under the labeling shows dashes in its table
    del rows[2]["dev_by_labeling"]
    lever = [line for line in recipe_sweep.tables(plan, rows).splitlines()
             if line.startswith("| lever ")][-1]
    assert lever.endswith("| – | – | – |")


def test_the_stored_prior_study_summaries_render_in_the_table() -> None:
    plan = recipe_sweep.load_plan(ROOT / "configs" / "prior_study" / "plan.yaml")
    stored = sorted((ROOT / "docs" / "recipe" / "summaries" / "prior_study").glob("*.json"))
    rows = [json.loads(path.read_text()) for path in stored]
    text = recipe_sweep.tables(plan, rows).split("\n\n")[0]  # the SCAR table (others follow)
    assert [line.split(" | ")[0] for line in text.splitlines()[2:]] == \
        [f"| {row['variant']}" for row in rows]


def test_the_prior_study_plan_keeps_its_retired_levers_as_records() -> None:
    """The biased yardstick stays; the prior's biased labeling lost and was taken out, so its
    variants stay only for --table, refused in one line naming the tag that still has it."""
    from trainer.config import run_config_from_mapping

    plan = recipe_sweep.load_plan(ROOT / "configs" / "prior_study" / "plan.yaml")
    assert "sar-linear" in plan["dev_labelings"]
    assert plan["variants"]["labeling_seed1"]["set"] == {"prior.labeling": {}, "seed": 1}
    with pytest.raises(ConfigError) as err:
        run_config_from_mapping(recipe_sweep.variant_config(plan, "labeling"))
    assert str(err.value).startswith("prior.labeling: removed")
    assert "prior-study-2026-11" in str(err.value)


def _provenance(suite_dir: Path, chunk_size: int) -> None:
    """What puicl-bench records of the settings a yardstick's results were computed with."""
    for pi in ("0.2", "0.8"):
        (suite_dir / f"pi_{pi}").mkdir(parents=True, exist_ok=True)
        from benchmark.methods.puicl import PUICL

        settings = {"weights_sha256": "ab" * 32, "_version": PUICL.version,
                    "chunk_size": chunk_size,
                    "max_labeled": 300, "n_estimators": 1, "partner": "auto",
                    "pool_sample": 20_000, "single_pass_limit": 1024, "threshold": 0.5,
                    "large_pool": "shared"}
        (suite_dir / f"pi_{pi}" / "provenance.json").write_text(
            json.dumps({"method_settings": {"puicl": settings}}))


def test_align_settings_scores_again_only_the_yardsticks_computed_with_other_settings(
        tmp_path, monkeypatch) -> None:
    """A classifier default that changed between two variants' scoring must not enter their
    difference: the variant's yardsticks whose provenance shows other settings than the plan's
    are scored again with the plan's, and the summary records them."""
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    before = _scored_before(tmp_path)
    before["dev_by_labeling"] = {"sar-linear": {"dev_auc": 0.5}}
    (tmp_path / "a" / "summary.json").write_text(json.dumps(before))
    _provenance(tmp_path / "a" / "dev_suite", chunk_size=1000)  # the current default
    _provenance(tmp_path / "a" / "dev_suite_sar-linear", chunk_size=200)  # already the plan's
    plan_path = tmp_path / "plan.yaml"
    plan = _plan(dev_labelings=["sar-linear"], dev_settings={"n_estimators": 1, "chunk_size": 200})
    plan_path.write_text(yaml.safe_dump(plan))
    assert recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path),
                              "--align-settings", "a"]) == 0
    command, = calls  # the SCAR yardstick only
    assert "--labeling" not in command
    settings = Path(command[command.index("--method-config") + 1])
    assert yaml.safe_load(settings.read_text()) == {"puicl": plan["dev_settings"]}
    after = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert after["dev_settings"] == plan["dev_settings"]
    assert after["dev_per_table"] == {"a": 0.7, "b": 0.9}
    assert after["dev_by_labeling"] == before["dev_by_labeling"]
    # once aligned (its provenance now the plan's), nothing is run and the bytes stay
    _provenance(tmp_path / "a" / "dev_suite", chunk_size=200)
    text = (tmp_path / "a" / "summary.json").read_bytes()
    recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--align-settings", "a"])
    assert len(calls) == 1 and (tmp_path / "a" / "summary.json").read_bytes() == text


def test_the_tables_pair_with_another_base_when_asked() -> None:
    """``--table --base VARIANT``: every difference against that variant, under SCAR and each
    labeling (the plan's base may lack a labeling's scores)."""
    plan = {"variants": {"base": {}, "other": {}, "lever": {}}}
    rows = [_row("base", {"a": 0.70, "b": 0.80}), _row("other", {"a": 0.60, "b": 0.70}),
            _row("lever", {"a": 0.65, "b": 0.70})]
    lever = next(line for line in recipe_sweep.tables(plan, rows, "other").splitlines()
                 if line.startswith("| lever "))
    assert "+0.0250 ± 0.0250" in lever
    assert "-0.0750" in next(line for line in recipe_sweep.tables(plan, rows).splitlines()
                             if line.startswith("| lever "))


def test_the_delta_figure_draws_the_paired_differences_and_needs_a_scored_base(
    tmp_path, monkeypatch
) -> None:
    """``--delta-figure``: one point per scored variant at its paired difference from the base
    (not the difference of the means), the seed-noise band and the plan's bar."""
    import matplotlib.axes

    drawn = {}

    def errorbar(self, x, y, xerr=None, **kwargs):
        drawn.update(x=list(x), xerr=list(xerr))

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", errorbar)
    plan = {"variants": {"base": {}, "base_seed1": {}, "lever": {}},
            "noise": ["base", "base_seed1"], "bar": 0.015}
    rows = [_row("base", {"a": 0.70, "b": 0.80}), _row("base_seed1", {"a": 0.71, "b": 0.80}),
            _row("lever", {"a": 0.74, "b": 0.80, "c": 0.10})]
    path = tmp_path / "delta.png"
    recipe_sweep.delta_figure(plan, rows, path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    np.testing.assert_allclose(drawn["x"], [0.005, 0.02])  # table c has no pair: left out
    np.testing.assert_allclose(drawn["xerr"], [0.005, 0.02])
    with pytest.raises(ValueError, match="the base other has no dev-suite score"):
        recipe_sweep.delta_figure(plan, rows, path, base="other")


def test_summaries_are_read_from_the_committed_copies_when_asked(tmp_path) -> None:
    plan = {"variants": {"base": {}, "lever": {}, "unscored": {}}}
    (tmp_path / "stored").mkdir()
    for name in ("lever", "base"):
        (tmp_path / "stored" / f"{name}.json").write_text(json.dumps({"variant": name}))
    found = recipe_sweep.summaries(plan, tmp_path / "runs", tmp_path / "stored")
    assert [row["variant"] for row in found] == ["base", "lever"]  # the plan's order
    assert recipe_sweep.summaries(plan, tmp_path / "runs") == []


@pytest.mark.parametrize("bar", ["high", True, float("inf")])
def test_a_bad_bar_is_named(tmp_path, bar) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"base": "b.yaml", "budget_steps": 1, "variants": {"a": {}},
                                    "bar": bar}))
    with pytest.raises(SystemExit, match="bar must be a finite number"):
        recipe_sweep.load_plan(path)


def test_dev_curve_scores_each_earlier_checkpoint_with_the_plans_settings(
    tmp_path, monkeypatch
) -> None:
    """``--dev-curve``: every curve point but the last exports its checkpoint and is scored
    with the plan's yardstick settings; the last takes the variant's own score, and one within
    1 % of its steps is skipped; a second call exports nothing again."""
    calls: list[list[str]] = []
    bench = _fake_bench(calls)

    def run(command: list[str], log: Path) -> float:
        if command[1] == "export":  # trainer export RUN --out DIR --step N
            calls.append(command)
            Path(command[command.index("--out") + 1]).mkdir(parents=True)
            return 0.0
        return bench(command, log)

    monkeypatch.setattr(recipe_sweep, "run", run)
    summary = _scored_before(tmp_path)
    summary["curve"] = [{"step": s, "cpu_minutes": s / 10, "val_auc": 0.8}
                        for s in (10, 20, 398, 400)]  # 398: a time limit's, within 1 %
    summary.update(parameters=10, dev_auc=0.85)  # the fake bench's suite figure is 0.8
    (tmp_path / "a" / "summary.json").write_text(json.dumps(summary))
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(_plan(dev_settings={"n_estimators": 1, "chunk_size": 200})))
    assert recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path),
                              "--dev-curve", "a"]) == 0
    exports = [c for c in calls if c[1] == "export"]
    assert [c[c.index("--step") + 1] for c in exports] == ["10", "20"]
    benches = [c for c in calls if c[1] != "export"]
    assert [Path(c[c.index("--weights") + 1]) for c in benches] == \
        [tmp_path / "a" / "curve" / f"step_{s}" / "weights" for s in (10, 20)]
    settings = Path(benches[0][benches[0].index("--method-config") + 1])
    assert yaml.safe_load(settings.read_text()) == {"puicl": {"n_estimators": 1, "chunk_size": 200}}
    curve = json.loads((tmp_path / "a" / "summary.json").read_text())["curve"]
    assert [p.get("dev_auc") for p in curve] == [0.8, 0.8, None, 0.85]
    assert curve[-1]["dev_per_table"] == summary["dev_per_table"]
    calls.clear()
    recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path), "--dev-curve", "a"])
    assert not [c for c in calls if c[1] == "export"]
    figure = tmp_path / "curve.png"
    recipe_sweep.main(["--plan", str(plan_path), "--out", str(tmp_path),
                       "--dev-curve-figure", str(figure)])
    assert figure.read_bytes()[:4] == b"\x89PNG"


PLANS = sorted((ROOT / "configs").rglob("plan.yaml"))


@pytest.mark.parametrize("plan_path", PLANS, ids=lambda p: p.parent.name)
def test_every_variant_of_a_committed_plan_is_a_valid_run_config(plan_path: Path) -> None:
    """A misspelt or renamed key in a plan fails here, not an hour into a sweep; the one kind
    of variant that may be refused is the record of a removed model option, refused in one
    line that says so."""
    plan = recipe_sweep.load_plan(plan_path)
    refused: dict[str, str] = {}
    for name in plan["variants"]:
        try:
            run_config_from_mapping(recipe_sweep.variant_config(plan, name))
        except ConfigError as error:
            refused[name] = str(error)
    assert all("removed" in message and "\n" not in message for message in refused.values()), \
        refused
    assert len(refused) < len(plan["variants"])
