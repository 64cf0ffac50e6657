"""YAML / JSON mappings -> validated, frozen dataclasses.

Every configuration in the project (the run configs in ``configs/``, the model config stored
next to the weights) goes through :func:`from_mapping`. It is strict on purpose: an unknown
key, a missing key or a value of the wrong type is a :class:`ConfigError` whose message names
the dotted path of the offending key (``training.optimizer.lr: expected a number, got 'abc'``),
so that a typo in a YAML file fails loudly instead of silently falling back to a default.

A config file may start from another: ``extends: base.yaml`` (relative to the file) takes the
base's mapping and deep-merges the file's own keys over it (:func:`load_yaml`,
:func:`merge_mappings`). Only the resolved mapping is validated and hashed, so moving values
into a base file changes no config hash.

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

import copy
import dataclasses
import functools
import hashlib
import json
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from puicl_common.config_errors import ConfigError
from puicl_common.config_errors import describe as _describe
from puicl_common.versioning import drop_removed_keys, is_legacy_value

T = TypeVar("T")

__all__ = [
    "ConfigError",
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

    data = _without_removed_keys(cls, data, path)
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
    own such keys are left out."""
    return _plain(obj, identity=True)


def _plain(obj: Any, identity: bool) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        legacy: Mapping[str, Any] = getattr(obj, "LEGACY_VALUES", {}) if identity else {}
        items = ((f.name, _plain(getattr(obj, f.name), identity)) for f in dataclasses.fields(obj))
        return {name: value for name, value in items
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


EXTENDS = "extends"
# bounds on what a config file may be: its size, the nesting of its values, how many values
# its YAML aliases expand it to (each may stand for a whole subtree, so a few dozen can expand
# to gigabytes) and the length of an extends chain
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_DEPTH = 64
MAX_CONFIG_VALUES = 100_000
MAX_EXTENDS_CHAIN = 32


def merge_mappings(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` deep-merged over ``base``; neither is modified.

    Where both hold a mapping under one key, the two merge key by key; any other value of
    ``override`` (a scalar, a list, ``null``, or a mapping over a non-mapping) replaces the
    base's. Keys only in ``base`` are kept, keys only in ``override`` are added.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = merge_mappings(below, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, resolving ``extends``; I/O and syntax problems are ConfigErrors.

    A file whose top level holds ``extends: other.yaml`` (a path relative to that file) is
    the mapping of ``other.yaml`` (itself resolved the same way) with the file's own keys
    deep-merged over it (:func:`merge_mappings`); the ``extends`` key itself is dropped. A
    cycle of ``extends``, a missing base file or a base that is not a mapping is an error
    naming the files. What callers validate and hash is always the resolved mapping.
    """
    return _resolve(Path(path), ())


def file_setting(path: str | Path, key: str) -> str:
    """Which file of ``path``'s ``extends`` chain sets the dotted ``key`` (``prior.scm.width``,
    ``prior.scm.noise_std[1]``), for an error message: ``path`` itself when it sets the key
    (or no file does: a missing key), else ``"BASE (extended by PATH)"`` for the nearest base
    that does. Every file of the chain was read once already; a problem reading one now gives
    ``path``."""
    parts = [part.split("[", 1)[0] for part in key.split(".")] if key else []
    chain: list[Path] = [Path(path)]
    try:
        while True:
            data = _read_mapping(chain[-1], chain[-2] if len(chain) > 1 else None)
            if _sets(data, parts):
                break
            name = data.get(EXTENDS)
            if not isinstance(name, str) or len(chain) > MAX_EXTENDS_CHAIN:
                return str(path)
            chain.append(Path(os.path.normpath(chain[-1].parent / name)))
    except ConfigError:
        return str(path)
    if len(chain) == 1:
        return str(path)
    return f"{chain[-1]} (extended by {', extended by '.join(map(str, reversed(chain[:-1])))})"


def _sets(data: Any, parts: list[str]) -> bool:
    """Whether the mapping ``data`` holds the key path ``parts``."""
    for part in parts:
        if not isinstance(data, Mapping) or part not in data:
            return False
        data = data[part]
    return bool(parts)


def _resolve(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """``path``'s mapping with its ``extends`` resolved; ``chain``: the files extending it."""
    seen = [p.resolve() for p in chain]
    if path.resolve() in seen:
        start = seen.index(path.resolve())
        cycle = " -> ".join(str(p) for p in (*chain[start:], path))
        raise ConfigError(EXTENDS, f"cycle of extends: {cycle}")
    if len(chain) >= MAX_EXTENDS_CHAIN:
        raise ConfigError(EXTENDS, f"{chain[0]} extends more than {MAX_EXTENDS_CHAIN} files in "
                          f"a chain (at {path})")
    data = _read_mapping(path, chain[-1] if chain else None)
    if EXTENDS not in data:
        return data
    name = data.pop(EXTENDS)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            EXTENDS, f"expected the path of a base config file, got {_describe(name)} (in {path})"
        )
    base = _resolve(Path(os.path.normpath(path.parent / name)), (*chain, path))
    return merge_mappings(base, data)


def _read_mapping(path: Path, extended_by: Path | None) -> dict[str, Any]:
    """One YAML file's top-level mapping, as written (``extends`` not resolved)."""
    import yaml  # local: keeps `import puicl_model` light

    role = f" (extended by {extended_by})" if extended_by is not None else ""
    key = EXTENDS if extended_by is not None else ""
    try:
        text = _read_config_text(path)
    except FileNotFoundError:
        what = "base config file" if extended_by is not None else "config file"
        raise ConfigError(key, f"{what} not found: {path}{role}") from None
    except OSError as err:
        raise ConfigError(key, f"cannot read config file {path}{role}: "
                          f"{err.strerror or err}") from None
    except ValueError as err:
        raise ConfigError(key, f"{path}{role} {err}") from None
    try:
        _check_yaml_shape(text)
        data = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader (above)
    except ValueError as err:
        raise ConfigError(key, f"{path}{role} {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(key, f"{path}{role} is not valid YAML: {_yaml_problem(err)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            key, f"{path}{role} must hold a mapping at the top level, got {_describe(data)}"
        )
    return data


class _RepeatedKey(ValueError):
    """A mapping of a config file that sets one key twice."""


@functools.cache
def _unique_key_loader() -> type:
    """PyYAML's SafeLoader, refusing a mapping that sets one key twice: YAML forbids it, and
    PyYAML would keep the last value, so that a second ``curriculum:`` section would replace
    the first without a word. A merge (``<<: *base``) may still be overridden key by key."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
            if isinstance(node, yaml.MappingNode):
                # by position, not line: a flow mapping ({a: 1, a: 2}) repeats a key on one line
                seen: dict[Any, tuple[int, int]] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    place = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                    try:
                        first = seen.setdefault(key, place)
                    except TypeError:  # an unhashable key: the base class refuses it
                        continue
                    if first != place:
                        where = (f"line {place[0]}, columns {first[1]} and {place[1]}"
                                 if first[0] == place[0] else f"lines {first[0]} and {place[0]}")
                        raise _RepeatedKey(
                            f"sets the key {_describe(key)} twice in one mapping ({where}); "
                            "the second would replace the first: keep one")
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def _read_config_text(path: Path) -> str:
    """The text of a config file that is a regular file of at most MAX_CONFIG_BYTES (a device
    such as /dev/zero, a FIFO or a huge file is refused before it is read whole)."""
    import stat

    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise ValueError("is not a regular file")
    with open(path, "rb") as stream:
        data = stream.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"is larger than {MAX_CONFIG_BYTES} bytes; a config file is small")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"is not UTF-8 text ({err.reason} at byte {err.start})") from None


def _check_yaml_shape(text: str) -> None:
    """Refuse YAML nested deeper than MAX_CONFIG_DEPTH, or whose aliases expand it to more than
    MAX_CONFIG_VALUES values, from its event stream, before it is built into objects (building
    recurses, and aliases expand when the value is printed, merged or hashed: a chain of a few
    dozen aliases that each repeat the one before doubles it a few dozen times)."""
    import yaml

    sizes: dict[str, int] = {}  # anchor -> how many values the anchored node expands to
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, values so far) per open node
    total = 0
    aliased = False  # whether an alias has added to the total

    def add(count: int) -> None:
        nonlocal total
        if open_nodes:
            anchor, so_far = open_nodes[-1]
            open_nodes[-1] = (anchor, so_far + count)
        total += count
        if total > MAX_CONFIG_VALUES and aliased:
            raise ValueError(f"expands to more than {MAX_CONFIG_VALUES} values through its "
                             "YAML aliases (*name); write the values out")
        if total > MAX_CONFIG_VALUES:
            raise ValueError(f"holds more than {MAX_CONFIG_VALUES} values; a config file "
                             "holds a few hundred")

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(open_nodes) >= MAX_CONFIG_DEPTH:
                raise ValueError(f"nests values deeper than {MAX_CONFIG_DEPTH} levels")
            open_nodes.append((event.anchor, 0))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, count = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = count + 1
            if open_nodes:  # the node's values are already in the total; the parent's too
                parent, so_far = open_nodes[-1]
                open_nodes[-1] = (parent, so_far + count + 1)
            total += 1
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1)
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_nodes):
                raise ValueError(f"holds a value that contains itself (*{event.anchor})")
            aliased = True
            add(sizes.get(event.anchor, 1))


def _yaml_problem(err: Exception) -> str:
    """A YAML error in one line, placed in the file ("line 2, column 1"): the parser's own
    text spans several lines and names "<unicode string>", not the file."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{context + ': ' if context else ''}{problem}{where}"
