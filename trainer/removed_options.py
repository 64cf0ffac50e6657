"""Config keys of training options that were removed: refused by name, or dropped at their
legacy values.

The recipe study (docs/recipe.md) tried the Muon optimizer, a warmup-stable-decay schedule and
the mean of the last checkpoints against the paper's AdamW recipe; none beat AdamW at a higher
learning rate, so they were taken out (the code is in git history). A config that still sets
one of their keys is refused with one line naming the key.

A key at its legacy value -- the value under which the trainer did what it does today
(``optimizer.name: adamw``, ``schedule: warmup_power``, ``average: ema``, the unused settings
at their defaults) -- is dropped instead of refused: the trainer wrote every key into each run
directory's ``config.yaml`` and checkpoint before the removal, and those runs must still load
and resume. Their training hashes never held these keys at these values (the legacy-values
rule of ``trainer.config.training_identity``), so dropping them changes no hash.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from puicl_common.configio import ConfigError

_MUON = "the Muon optimizer (the trainer uses AdamW)"
_WSD = "the warmup-stable-decay schedule (the trainer uses the phase1/phase2 schedules)"
_AVERAGE = "checkpoint averaging (export writes the EMA weights)"

# dotted path -> (legacy value, what was removed with it)
REMOVED_KEYS: dict[tuple[str, ...], tuple[Any, str]] = {
    ("training", "optimizer", "name"): ("adamw", _MUON),
    ("training", "optimizer", "muon_lr"): (1e-3, _MUON),
    ("training", "optimizer", "muon_momentum"): (0.95, _MUON),
    ("training", "optimizer", "muon_nesterov"): (True, _MUON),
    ("training", "optimizer", "muon_weight_decay"): (0.01, _MUON),
    ("training", "optimizer", "muon_ns_steps"): (5, _MUON),
    ("training", "optimizer", "muon_adjust_lr"): ("match_rms_adamw", _MUON),
    ("training", "schedule"): ("warmup_power", _WSD),
    ("training", "wsd"): (
        {"peak_lr": 1e-3, "floor_lr": 0.0, "warmup_steps": 100, "decay_fraction": 0.2,
         "decay_shape": "linear"},
        _WSD,
    ),
    ("training", "average"): ("ema", _AVERAGE),
    ("training", "average_last"): (10, _AVERAGE),
}


def _is_legacy(value: Any, legacy: Any) -> bool:
    if isinstance(legacy, dict):  # a section: each key it sets at its legacy value
        return isinstance(value, Mapping) and all(
            key in legacy and _is_legacy(item, legacy[key]) for key, item in value.items()
        )
    if isinstance(legacy, bool) or isinstance(value, bool):
        return value is legacy
    return value == legacy


def without_removed_options(data: Any, refuse: bool = True) -> Any:
    """``data`` (a run config's mapping) without the keys of removed options.

    With ``refuse``, a removed key at any value but its legacy one is a ``ConfigError``
    naming the key; without, every removed key is dropped (for reading what old checkpoints
    recorded). ``data`` is not modified; anything that is not a mapping where a section is
    expected is left for the config's own validation to report.
    """
    if not isinstance(data, Mapping):
        return data
    cleaned = copy.deepcopy(dict(data))
    for path, (legacy, what) in REMOVED_KEYS.items():
        section: Any = cleaned
        for key in path[:-1]:
            section = section.get(key) if isinstance(section, dict) else None
        if not isinstance(section, dict) or path[-1] not in section:
            continue
        if refuse and not _is_legacy(section[path[-1]], legacy):
            raise ConfigError(
                ".".join(path),
                f"removed: this key belonged to {what}, which was taken out after the recipe "
                "study (docs/recipe.md); delete the key",
            )
        del section[path[-1]]
    return cleaned
