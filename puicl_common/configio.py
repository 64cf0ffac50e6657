"""YAML / JSON mappings -> validated, frozen dataclasses.

Every configuration in the project (the run configs in ``configs/``, the model config stored
next to the weights) goes through :func:`from_mapping`. It is strict on purpose: an unknown
key, a missing key or a value of the wrong type is a :class:`ConfigError` whose message names
the dotted path of the offending key (``training.optimizer.lr: expected a number, got 'abc'``),
so that a typo in a YAML file fails loudly instead of silently falling back to a default.

Reading the files is :mod:`puicl_common.yaml_files` (``extends``, the limits on what a config
file may be); its public names, :func:`load_yaml`, :func:`merge_mappings` and
:func:`file_setting`, are importable from here too. Only the resolved mapping is validated
and hashed (:func:`config_hash`), so moving values into a base file changes no config hash.

Range checks live on the dataclasses themselves: a config class may define
``validate(self) -> None`` and raise :class:`ConfigError` with the *field name* as ``key``;
:func:`from_mapping` prefixes the path of the enclosing section. A class may also list keys it
no longer has (``REMOVED_KEYS``, :func:`from_mapping`): files written while they existed still
load, where they hold the value that meant "as today" (the versioning rule of
:mod:`puicl_common.versioning`; every part declares its removed keys this way, on the class
of the section that held them, so that one pass of :func:`from_mapping` applies them all).
A key added after configs were stored has a legacy value, listed the same way (``LEGACY_VALUES``)
and left out of the dict that is hashed while it holds it (:func:`identity_dict`).

This module imports neither torch nor numpy, so the prior generator's worker processes can use
it cheaply.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from puicl_common.config_errors import ConfigError
from puicl_common.config_errors import describe as _describe
from puicl_common.versioning import drop_removed_keys, is_legacy_value
from puicl_common.yaml_files import (
    EXTENDS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_VALUES,
    MAX_EXTENDS_CHAIN,
    file_setting,
    load_yaml,
    merge_mappings,
)

T = TypeVar("T")

__all__ = [
    "EXTENDS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_VALUES",
    "MAX_EXTENDS_CHAIN",
    "ConfigError",
    "config_differences",
    "config_hash",
    "file_setting",
    "from_mapping",
    "identity_dict",
    "load_yaml",
    "merge_mappings",
    "require",
    "strip_removed_keys",
    "to_dict",
]


def require(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError(key, message)`` unless ``condition`` holds (for ``validate``)."""
    if not condition:
        raise ConfigError(key, message)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _convert(value: Any, annotation: Any, path: str) -> Any:
    """Convert one YAML/JSON value to ``annotation``, or raise ConfigError naming ``path``."""
    if annotation is Any:
        return value
    origin = get_origin(annotation)

    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        options = get_args(annotation)
        if value is None and type(None) in options:
            return None
        others = [option for option in options if option is not type(None)]
        if len(others) == 1:  # X | None: X's own error, which names the nested key
            return _convert(value, others[0], path)
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, path)
            except ConfigError as err:
                errors.append(err.message)
        raise ConfigError(path, "; or ".join(errors))

    if origin is Literal:
        allowed = get_args(annotation)
        if value not in allowed:
            choices = ", ".join(repr(a) for a in allowed)
            raise ConfigError(path, f"must be one of {choices}, got {_describe(value)}")
        return value

    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        return from_mapping(annotation, value, path)

    if origin in (tuple,):
        args = get_args(annotation)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {_describe(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(path, f"expected a list of {len(args)} values, got {len(value)}")
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_convert(v, a, f"{path}[{i}]") for i, (v, a) in pairs)

    if origin in (list,):
        (item,) = get_args(annotation) or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {_describe(value)}")
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]

    if origin in (dict, Mapping, typing.Mapping):
        key_type, item = get_args(annotation) or (str, Any)
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"expected a mapping, got {_describe(value)}")
        return {
            _convert(k, key_type, path): _convert(v, item, _join(path, str(k)))
            for k, v in value.items()
        }

    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"expected true or false, got {_describe(value)}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(path, f"expected an integer, got {_describe(value)}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            # YAML 1.1 reads "1e-4" (no dot) as a string; accept numeric strings.
            if isinstance(value, str):
                try:
                    return float(value)
                except ValueError:
                    pass
            raise ConfigError(path, f"expected a number, got {_describe(value)}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"expected a string, got {_describe(value)}")
        return value
    if annotation is Path:
        if not isinstance(value, (str, Path)):
            raise ConfigError(path, f"expected a path, got {_describe(value)}")
        return Path(value)
    raise TypeError(f"configio cannot convert to {annotation!r} (at {path})")


def from_mapping(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, strictly.

    Unknown keys and missing required keys are errors; fields with defaults may be omitted.
    Nested dataclass fields are built recursively. After construction ``validate()`` runs if
    the class defines it.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(path, f"expected a mapping of keys to values, got {_describe(data)}")

    data = _under_current_names(cls, _without_removed_keys(cls, data, path), path)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        allowed = ", ".join(sorted(fields))
        raise ConfigError(_join(path, str(unknown[0])), f"unknown key (allowed here: {allowed})")

    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], _join(path, name))
        elif (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        ):
            raise ConfigError(_join(path, name), "missing required key")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ConfigError as err:
            raise err.under(path) from None
    return obj


def _without_removed_keys(cls: type, data: Mapping[str, Any], path: str, *,
                          refuse: bool = True) -> Mapping[str, Any]:
    """``data`` less the keys that ``cls`` no longer has, by the rule for removed options
    (:func:`puicl_common.versioning.drop_removed_keys`).

    ``cls.REMOVED_KEYS`` maps a removed key to its old default (the one value that meant
    what the class now does), and ``cls.REMOVED_WHY`` says why the keys went: one reason for
    all of them, or one per key. Stored configs that name a key at that value load as if it
    were absent; any other value is refused (without ``refuse``: dropped too).
    """
    removed: Mapping[str, Any] = getattr(cls, "REMOVED_KEYS", {})
    if not any(key in removed for key in data):
        return data

    why = getattr(cls, "REMOVED_WHY", "an option this config no longer has")
    return drop_removed_keys(
        data,
        {key: (old, why if isinstance(why, str) else why[key]) for key, old in removed.items()},
        refuse=refuse, prefix=path)


def _under_current_names(cls: type, data: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """``data`` with each key that ``cls`` renamed (``cls.STORED_NAMES``: current name -> the
    name stored before) under its current name; both names at once are refused."""
    stored_names: Mapping[str, str] = getattr(cls, "STORED_NAMES", {})
    renamed = {stored: name for name, stored in stored_names.items() if stored in data}
    if not renamed:
        return data
    for stored, name in renamed.items():
        if name in data:
            raise ConfigError(_join(path, stored), f"the former name of {name!r}, which is "
                                                   "given too: give one of them")
    return {renamed.get(key, key): value for key, value in data.items()}


def strip_removed_keys(cls: type, data: Any) -> Any:
    """``data``, a mapping stored for ``cls`` (a run directory's config, a checkpoint's),
    less every removed key of ``cls`` and of the config classes nested in it, at any value:
    what an old file recorded, read for comparison with today's config, never refused.
    Anything that is not a mapping where a section is expected is left as it is."""
    if not isinstance(data, Mapping) or not dataclasses.is_dataclass(cls):
        return data
    result = dict(_without_removed_keys(cls, data, "", refuse=False))
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in result and isinstance(hints[field.name], type):
            result[field.name] = strip_removed_keys(hints[field.name], result[field.name])
    return result


def to_dict(obj: Any) -> Any:
    """A plain JSON/YAML-serialisable structure (tuples become lists, paths strings)."""
    return _plain(obj, identity=False)


def identity_dict(obj: Any) -> Any:
    """:func:`to_dict` of a config as it identifies what it makes (the dict that is hashed):
    each section leaves out the keys that its class lists in ``LEGACY_VALUES`` (key -> legacy
    value) while they hold their legacy value, the versioning rule for added options
    (:mod:`puicl_common.versioning`). A section is compared with its legacy value after its
    own such keys are left out. A key the class renamed (``STORED_NAMES``) appears under the
    name results were stored under, so that they keep their identity."""
    return _plain(obj, identity=True)


def _plain(obj: Any, identity: bool) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        legacy: Mapping[str, Any] = getattr(obj, "LEGACY_VALUES", {}) if identity else {}
        # a renamed key identifies results under the name they were stored under
        stored: Mapping[str, str] = getattr(obj, "STORED_NAMES", {}) if identity else {}
        items = ((f.name, _plain(getattr(obj, f.name), identity)) for f in dataclasses.fields(obj))
        return {stored.get(name, name): value for name, value in items
                if not (name in legacy and is_legacy_value(value, legacy[name]))}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v, identity) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, identity) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def config_hash(obj: Any) -> str:
    """sha256 (hex) of the canonical JSON form of a config; stable across runs and machines."""
    canonical = json.dumps(to_dict(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any],
                       prefix: str = "") -> list[str]:
    """Each dotted key whose value differs between two config mappings, as one line naming
    both values (``saved``: the checkpoint's)."""
    diffs = []
    for key in sorted(set(saved) | set(current)):
        path = f"{prefix}{key}"
        a, b = saved.get(key), current.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            diffs.extend(config_differences(a, b, path + "."))
        elif a != b:
            diffs.append(f"{path}: {a!r} in the checkpoint, {b!r} now")
    return diffs
