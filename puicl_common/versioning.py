"""The versioning rule of every stored config: options come and go, old hashes stay.

Config hashes name shards, checkpoints and weights, so adding or removing an option must not
change the hash of a config that keeps today's behaviour. Two rules, each written once and
wired the same way for every part: the class of the section that holds (or held) the key
lists it, and one function of :mod:`puicl_common.configio` applies the lists of every
section of a config.

* **An added option** has a *legacy value*, the one that reproduces what was done before it
  existed. The section's class lists it (``LEGACY_VALUES``: key -> legacy value), and
  :func:`puicl_common.configio.identity_dict`, the dict that is hashed, leaves the key out
  while it holds that value, so such a config keeps its hash (``GenerationConfig.identity()``
  for the prior's hash, ``InferenceSettings.identity()`` for the benchmark's cache keys; the
  trainer's ``training_identity`` names the fields it hashes, so a new one is out by
  construction).
* **A removed option** has its *old default*, the value under which the code did what it does
  today. :func:`drop_removed_keys` drops a key at its old default (configs and checkpoints
  written while it existed still load, as before its removal they never entered a hash at
  that value) and refuses any other value with a :class:`~puicl_common.configio.ConfigError`
  naming the key and why the option went. The section's class lists it (``REMOVED_KEYS``:
  key -> old default, ``REMOVED_WHY``) and :func:`puicl_common.configio.from_mapping` applies
  it while it builds that section (``ModelConfig``, the prior's sections, the trainer's
  ``TrainingConfig`` and ``OptimizerConfig``, ``InferenceSettings``).

Values compare by :func:`is_legacy_value`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from puicl_common.config_errors import ConfigError, describe

__all__ = ["drop_removed_keys", "is_legacy_value"]

KeyPath = str | tuple[str, ...]


def is_legacy_value(value: Any, legacy: Any) -> bool:
    """Whether ``value`` is ``legacy``: equal, except that a bool matches only that bool (1 is
    not ``True``), and that a mapping matches a legacy section when each key it sets is in
    the section at its legacy value (a section written out in part)."""
    if isinstance(legacy, Mapping):
        return isinstance(value, Mapping) and all(
            key in legacy and is_legacy_value(item, legacy[key]) for key, item in value.items()
        )
    if isinstance(legacy, bool) or isinstance(value, bool):
        return value is legacy
    return bool(value == legacy)


def _path(key: KeyPath) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _drop_at(mapping: dict[str, Any], path: tuple[str, ...],
             drop: Callable[[tuple[str, ...], Any], bool], where: tuple[str, ...] = ()) -> None:
    """Delete ``mapping``'s entry at ``path`` where ``drop(full path, value)`` says so; the
    sections on the way are copied, so that the caller's own mappings are never changed."""
    head, *rest = path
    if head not in mapping:
        return
    if not rest:
        if drop((*where, head), mapping[head]):
            del mapping[head]
        return
    section = mapping[head]
    if not isinstance(section, Mapping):
        return  # not a section: the config's own validation reports it
    mapping[head] = dict(section)
    _drop_at(mapping[head], tuple(rest), drop, (*where, head))


def drop_removed_keys(mapping: Mapping[str, Any], removed: Mapping[KeyPath, tuple[Any, str]],
                      *, refuse: bool = True, prefix: str = "") -> dict[str, Any]:
    """``mapping`` less the keys of ``removed`` options (a key by its name, a nested one by its
    path), each mapped to ``(old default, why it was removed)``; ``mapping`` itself is not
    changed.

    With ``refuse``, a removed key at any value but its old default is a ``ConfigError``
    naming the key (under ``prefix``, the dotted path of ``mapping`` in its file); without,
    every removed key is dropped (to read what an old checkpoint recorded).
    """
    result = dict(mapping)
    for key, (old_default, why) in removed.items():

        def drop(path: tuple[str, ...], held: Any, old_default: Any = old_default,
                 why: str = why) -> bool:
            if refuse and not is_legacy_value(held, old_default):
                name = ".".join(path if not prefix else (prefix, *path))
                raise ConfigError(name, f"removed: {why}; delete the key (only its former "
                                        f"default {describe(old_default)} is still read, got "
                                        f"{describe(held)})")
            return True

        _drop_at(result, _path(key), drop)
    return result
