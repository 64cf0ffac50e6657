"""A run's training state: the model, its EMA, the optimizer and the skip counters.

Everything here is what a checkpoint restores (with the RNG states, ``trainer.checkpoint``).
The initial weights are drawn from the run's seed, the same on every rank, or read from
``training.init_weights`` for a fine-tuning run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from puicl_common.configio import ConfigError
from puicl_model.net.model import PUICLModel
from puicl_model.net.weights import WeightsError, load_weights
from trainer.activation_checkpointing import apply_activation_checkpointing
from trainer.config import RunConfig
from trainer.ema import WeightEMA
from trainer.optimizers import build_optimizer

# seed-key word for the model's initial weights (docs/architecture.md §3: keyed by what is drawn)
INIT_KEY = 0x1A17


@dataclass
class Counters:
    skipped_total: int = 0
    consecutive_skips: int = 0

    def state(self) -> dict[str, int]:
        return {"skipped_total": self.skipped_total, "consecutive_skips": self.consecutive_skips}


@dataclass
class TrainingState:
    """What a step changes: the weights, their EMA, the optimizer's state and the counters."""

    model: PUICLModel
    ema: WeightEMA
    optimizer: torch.optim.Optimizer
    counters: Counters = field(default_factory=Counters)

    @classmethod
    def initial(cls, config: RunConfig, device: torch.device) -> TrainingState:
        """The state before the run's first step."""
        model = init_model(config, device)
        ema = WeightEMA(model, config.training.ema_decay)
        return cls(model, ema, build_optimizer(model, config.training))

    def set_attention(self, backend: str) -> None:
        """Train (and validate the EMA) with the attention backend ``backend``."""
        self.model.attention = backend
        self.ema.module.attention = backend

    def load(self, payload: dict[str, Any]) -> None:
        """Take the state of a checkpoint's payload (``trainer.segment`` writes it)."""
        self.model.load_state_dict(payload["model"])
        self.ema.load_state_dict(payload["ema"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.counters = Counters(**payload["counters"])


def init_model(config: RunConfig, device: torch.device) -> PUICLModel:
    """The model with initial weights drawn from the run's seed (same on every rank), or
    read from ``training.init_weights`` for a fine-tuning run."""
    sequence = np.random.SeedSequence(config.seed, spawn_key=(INIT_KEY,))
    seed_words = sequence.generate_state(2)
    # seeded either way: the torch generator's state after this point is part of the run
    torch.manual_seed(int(seed_words[0]) << 32 | int(seed_words[1]))
    model = PUICLModel(config.model).to(device)
    if config.training.init_weights is not None:
        model.load_state_dict(_initial_weights(config))
    if config.training.activation_checkpointing:
        apply_activation_checkpointing(model)
    return model


def _initial_weights(config: RunConfig) -> dict[str, torch.Tensor]:
    """The state dict at ``training.init_weights``, checked against the config's model."""
    path = config.training.init_weights
    try:
        loaded = load_weights(path)  # verifies names, shapes and the checksum
    except WeightsError as err:
        raise ConfigError("training.init_weights", str(err)) from None
    if loaded.config != config.model:
        raise ConfigError(
            "training.init_weights",
            f"{path} holds a model with {loaded.config.to_mapping()}, but the config's model "
            f"section asks for {config.model.to_mapping()}: set the model section to the "
            "weights' config",
        )
    return loaded.state_dict()
