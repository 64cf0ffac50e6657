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
rule of ``trainer.config.training_identity``), so dropping them changes no hash. Both rules
are :mod:`puicl_common.versioning`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from puicl_common.versioning import drop_removed_keys

_STUDY = "which was taken out after the recipe study (docs/recipe.md)"
_MUON = f"this key belonged to the Muon optimizer (the trainer uses AdamW), {_STUDY}"
_WSD = (f"this key belonged to the warmup-stable-decay schedule (the trainer uses the "
        f"phase1/phase2 schedules), {_STUDY}")
_AVERAGE = f"this key belonged to checkpoint averaging (export writes the EMA weights), {_STUDY}"

# dotted path -> (legacy value, why it was removed): puicl_common.versioning's removed-key rule
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


def without_removed_options(data: Any, refuse: bool = True) -> Any:
    """``data`` (a run config's mapping) without the keys of removed options.

    With ``refuse``, a removed key at any value but its legacy one is a ``ConfigError``
    naming the key; without, every removed key is dropped (for reading what old checkpoints
    recorded). ``data`` is not modified; anything that is not a mapping where a section is
    expected is left for the config's own validation to report.
    """
    if not isinstance(data, Mapping):
        return data
    return drop_removed_keys(data, REMOVED_KEYS, refuse=refuse)
