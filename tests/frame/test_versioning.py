"""The versioning rule (puicl_common.versioning): keys at their legacy value are dropped
before hashing, removed keys are refused unless at their old default; the prior generator,
the model and the trainer all go through it."""

from __future__ import annotations

import pytest

from puicl_common.configio import ConfigError
from puicl_common.versioning import drop_legacy_values, drop_removed_keys, is_legacy_value


def test_legacy_values_are_dropped_only_at_their_value_and_the_input_is_kept() -> None:
    config = {"a": 1, "prior": {"scm": {"sampler": "box_muller", "depth": 4}, "rule": None}}
    legacy = {"a": 1, ("prior", "scm", "sampler"): "box_muller", ("prior", "rule"): None,
              ("prior", "absent"): 0, ("missing", "section"): 0}
    assert drop_legacy_values(config, legacy) == {"prior": {"scm": {"depth": 4}}}
    assert config["prior"]["scm"]["sampler"] == "box_muller" and config["a"] == 1  # unchanged
    other = {"a": 2, "prior": {"scm": {"sampler": "table"}, "rule": {"kind": "x"}}}
    assert drop_legacy_values(other, legacy) == other


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
