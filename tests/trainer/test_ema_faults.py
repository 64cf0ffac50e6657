"""EMA arithmetic, the fault-injection spec and the step's hook point."""

from __future__ import annotations

import pytest
import torch

from trainer import hooks
from trainer.ema import WeightEMA
from trainer.faults import parse_faults
from trainer.metrics_log import read_metrics

from .conftest import run_inprocess


def test_ema_follows_the_formula_and_is_detached() -> None:
    model = torch.nn.Linear(3, 2)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    ema = WeightEMA(model, decay=0.95)
    expected = {k: v.clone() for k, v in start.items()}
    for step in range(3):
        with torch.no_grad():
            for param in model.parameters():
                param.add_(float(step + 1))
        ema.update(model)
        for name, value in model.state_dict().items():
            expected[name] = 0.95 * expected[name] + 0.05 * value
    for name, value in ema.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=1e-6, atol=1e-6)
    assert not any(p.requires_grad for p in ema.module.parameters())
    with pytest.raises(ValueError, match=r"EMA decay must be in \[0, 1\)"):
        WeightEMA(model, decay=1.0)


def test_fault_spec() -> None:
    plan = parse_faults("nonfinite_loss@3:1, kill@7:0,nonfinite_grad@4:0,sigterm@9:1")
    assert plan.corruption_at(3, 1) == "loss" and plan.corruption_at(3, 0) is None
    assert plan.corruption_at(4, 0) == "grad"
    assert plan.kill_at(7, 0) and not plan.kill_at(3, 1)
    assert plan.sigterm_at(9, 1) and not plan.sigterm_at(9, 0)
    assert parse_faults(None) == parse_faults("")
    with pytest.raises(ValueError, match="cannot parse 'nan@3:1'; expected KIND@STEP:RANK"):
        parse_faults("nan@3:1")
    # only the steps and ranks the plan names get a hook that does something
    assert plan.hook(3, 1) is not hooks.NO_HOOK and plan.hook(3, 0) is hooks.NO_HOOK


def test_a_hook_installed_from_outside_reaches_the_step(smoke_shards, tmp_path) -> None:
    assert hooks.hook_for(1, 0) is hooks.NO_HOOK  # nothing installed: the no-op
    with hooks.installed(parse_faults("nonfinite_loss@1:0").hook):
        assert run_inprocess(tmp_path / "run", smoke_shards, until_step=3) == 0
    assert hooks.hook_for(1, 0) is hooks.NO_HOOK  # and gone again afterwards
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records if r.get("event") == "skipped"] == [2]
