"""benchmarks/recipe_sweep.py's dev subset: a plan's ``dev_settings`` reach ``puicl-bench`` as
its ``--method-config``, so that variants trained on different days are scored alike; without
them the classifier's defaults are used. And the study's plan scores with the single pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "recipe_sweep.py"

# a script, not a module of the package: loaded from its file
_spec = importlib.util.spec_from_file_location("recipe_sweep", SCRIPT)
recipe_sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe_sweep)


def _fake_bench(calls: list[list[str]]):
    """Stands in for running ``puicl-bench``: records the command, writes a results table."""

    def run(command: list[str], log: Path) -> float:
        calls.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"dataset": ["a", "a", "b"], "auc": [0.6, 0.8, 0.9]}).to_csv(
            out / "results.csv", index=False)
        return 0.0

    return run


def test_dev_settings_become_the_benchmarks_method_config(tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    auc, per_dataset = recipe_sweep.dev_auc(tmp_path / "w", tmp_path, {"n_estimators": 1})
    assert per_dataset == {"a": 0.7, "b": 0.9} and abs(auc - 0.8) < 1e-12
    command = calls[0]
    settings = Path(command[command.index("--method-config") + 1])
    assert yaml.safe_load(settings.read_text()) == {"puicl": {"n_estimators": 1}}


def test_without_dev_settings_the_classifier_defaults_are_used(tmp_path, monkeypatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(recipe_sweep, "run", _fake_bench(calls))
    recipe_sweep.dev_auc(tmp_path / "w", tmp_path)
    assert "--method-config" not in calls[0]


def test_the_study_plan_scores_its_dev_subset_with_the_single_pass() -> None:
    plan = recipe_sweep.load_plan(ROOT / "configs" / "recipe_study" / "plan.yaml")
    assert plan["dev_settings"] == {"n_estimators": 1}
