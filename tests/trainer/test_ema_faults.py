"""EMA arithmetic and the fault-injection spec."""

from __future__ import annotations

import pytest
import torch

from trainer.ema import WeightEMA
from trainer.faults import parse_faults


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
