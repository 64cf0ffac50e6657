"""benchmarks/recipe_sweep.py's yardstick: the development suite at three π, never the
benchmark; a plan's ``dev_settings`` reach ``puicl-bench`` as its ``--method-config``; the
table reports each variant's paired difference from the base next to the measured seed noise."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "recipe_sweep.py"

# a script, not a module of the package: loaded from its file
_spec = importlib.util.spec_from_file_location("recipe_sweep", SCRIPT)
recipe_sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe_sweep)


def _fake_bench(calls: list[list[str]]):
    """Stands in for running ``puicl-bench``: records the command, writes a per-table CSV."""

    def run(command: list[str], log: Path) -> float:
        calls.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"dataset": ["a", "a", "b", "b"], "method": "puicl",
                      "pi_target": [0.2, 0.8, 0.2, 0.8], "auc": [0.6, 0.8, 0.9, 0.9]}).to_csv(
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
