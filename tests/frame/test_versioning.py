"""The versioning rule (puicl_common.versioning): keys at their legacy value are left out
of the identity, removed keys are refused unless at their old default; the prior generator,
the model and the trainer all go through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from puicl_common.configio import ConfigError, identity_dict, to_dict
from puicl_common.versioning import drop_removed_keys, is_legacy_value


@dataclass(frozen=True)
class _Rule:
    kind: str = "x"
    strict: bool = False

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"strict": False}


@dataclass(frozen=True)
class _Section:
    depth: int = 4
    sampler: str = "box_muller"
    rule: _Rule | None = None
    window: dict[str, int] | None = None

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"sampler": "box_muller", "rule": None,
                                               "window": {"lo": 1, "hi": 2}}


def test_legacy_values_are_left_out_of_the_identity_only_at_their_value() -> None:
    assert identity_dict(_Section()) == {"depth": 4, "window": None}
    assert identity_dict(_Section(window={"lo": 1})) == {"depth": 4}  # a legacy section in part
    assert to_dict(_Section()) == {"depth": 4, "sampler": "box_muller", "rule": None,
                                   "window": None}
    other = _Section(sampler="table", rule=_Rule(strict=True), window={"lo": 0})
    assert identity_dict(other) == to_dict(other)
    # each section applies its own table; a section is compared once its own keys are out
    assert identity_dict(_Section(rule=_Rule())) == {"depth": 4, "rule": {"kind": "x"},
                                                     "window": None}


def test_a_bool_is_never_the_number_it_equals() -> None:
    assert is_legacy_value(True, True) and is_legacy_value(1.0, 1)
    assert not is_legacy_value(1, True) and not is_legacy_value(False, 0)
    # a legacy section matches when each key written out holds its legacy value
    section = {"peak_lr": 1e-3, "warmup_steps": 100}
    assert is_legacy_value({"peak_lr": 0.001}, section)
    assert not is_legacy_value({"peak_lr": 0.01}, section)
    assert not is_legacy_value({"other": 1}, section)


def test_removed_keys_load_at_their_old_default_and_are_refused_otherwise() -> None:
    removed = {"norm": ("post", "it lost"), ("training", "average"): ("ema", "it went")}
    stored = {"norm": "post", "size": 3, "training": {"average": "ema", "lr": 1}}
    assert drop_removed_keys(stored, removed) == {"size": 3, "training": {"lr": 1}}
    assert stored["training"] == {"average": "ema", "lr": 1}  # unchanged
    with pytest.raises(ConfigError) as caught:
        drop_removed_keys({"training": {"average": "last"}}, removed, prefix="run")
    assert str(caught.value) == ("run.training.average: removed: it went; delete the key (only "
                                 "its former default 'ema' is still read, got 'last')")
    with pytest.raises(ConfigError, match=r"^norm: removed: it lost;"):
        drop_removed_keys({"norm": True}, removed)
    # reading what an old checkpoint recorded: every removed key goes, whatever its value
    assert drop_removed_keys({"norm": "pre", "training": {"average": "last"}}, removed,
                             refuse=False) == {"training": {}}
