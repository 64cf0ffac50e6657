"""``training.precision: bf16`` (autocast, with the loss, EMA and optimizer state in float32) and
``training.compile`` (torch.compile applied by the trainer), on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from puicl_common.configio import ConfigError
from trainer.batching import collate_with_targets
from trainer.config import run_config_from_mapping
from trainer.export import load_run_checkpoint
from trainer.loss import per_task_loss
from trainer.metrics_log import read_metrics

from .conftest import SMOKE, run_inprocess

STEPS = 3


def _config_with(tmp_path: Path, old: str, new: str) -> Path:
    text = SMOKE.read_text()
    assert text.count(old) == 1
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace(old, new))
    return path


def _losses(run_dir: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]


def test_loss_is_float32_from_bfloat16_logits() -> None:
    class Task:
        def __init__(self, rows: int) -> None:
            self.x = torch.randn(rows, 3).numpy()
            self.y = (torch.arange(rows) % 2).numpy()
            self.n_labeled = 2

    _, targets, unlabeled = collate_with_targets([Task(6), Task(9)])
    logits = torch.randn(2, 9, 2).to(torch.bfloat16)
    assert per_task_loss(logits, targets, unlabeled).dtype == torch.float32


def test_bf16_autocast_keeps_weights_ema_and_optimizer_state_in_float32(smoke_shards, tmp_path):
    fp32, bf16 = tmp_path / "fp32", tmp_path / "bf16"
    assert run_inprocess(fp32, smoke_shards, max_steps=STEPS) == 0  # auto: fp32 on CPU
    config = _config_with(tmp_path, "precision: auto", "precision: bf16")
    assert run_inprocess(bf16, smoke_shards, config=config, max_steps=STEPS) == 0
    _, payload = load_run_checkpoint(bf16)
    assert payload["step"] == STEPS
    for part in ("model", "ema"):
        dtypes = {t.dtype for t in payload[part].values() if torch.is_floating_point(t)}
        assert dtypes == {torch.float32}, part
    moments = {
        t.dtype
        for state in payload["optimizer"]["state"].values()
        for key, t in state.items()
        if key in ("exp_avg", "exp_avg_sq")
    }
    assert moments == {torch.float32}
    # autocast did run: bf16 matrix products change the losses, though not by much
    losses, reference = _losses(bf16), _losses(fp32)
    assert losses != reference
    assert losses == pytest.approx(reference, rel=0.05)


def test_compile_field_is_validated() -> None:
    assert run_config_from_mapping({}).training.compile is False
    with pytest.raises(ConfigError, match=r"training\.compile"):
        run_config_from_mapping({"training": {"compile": "yes"}})


def test_compile_wraps_the_model_the_steps_run(smoke_shards, tmp_path, monkeypatch) -> None:
    # torch.compile itself takes minutes on 2 cores for this model's dynamic shapes; what the
    # trainer owns is the wiring: the step runs what torch.compile returned
    compiled = []

    def fake_compile(module, *args, **kwargs):
        calls = []

        def forward(*inputs, **named):
            calls.append(1)
            return module(*inputs, **named)

        compiled.append((module, calls))
        return forward

    monkeypatch.setattr(torch, "compile", fake_compile)
    config = _config_with(tmp_path, "  log_every: 1\n", "  log_every: 1\n  compile: true\n")
    assert run_inprocess(tmp_path / "compiled", smoke_shards, config=config, max_steps=2) == 0
    assert len(compiled) == 1
    module, calls = compiled[0]
    assert type(module).__name__ == "PUICLModel"
    assert module.layout._torchdynamo_disable  # the layout's host bookkeeping stays eager
    assert len(calls) == 8  # 2 steps x 4 units of 2 tasks, one micro-batch each
