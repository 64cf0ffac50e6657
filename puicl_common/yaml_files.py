"""Config files: YAML read safely, and ``extends`` resolved.

A config file may start from another: ``extends: base.yaml`` (relative to the file) takes the
base's mapping and deep-merges the file's own keys over it (:func:`load_yaml`,
:func:`merge_mappings`). Only the resolved mapping is validated and hashed (by
:mod:`puicl_common.configio`), so moving values into a base file changes no config hash;
:func:`file_setting` says which file of a chain sets a key, for an error message.

A config file is small, and a file that is not is refused before it is built into objects:
only a regular UTF-8 file of at most ``MAX_CONFIG_BYTES`` is read, values nested deeper than
``MAX_CONFIG_DEPTH``, more than ``MAX_CONFIG_VALUES`` values (as written or through YAML
aliases), a value containing itself, a key set twice in one mapping and an ``extends`` chain
longer than ``MAX_EXTENDS_CHAIN`` are errors. Every problem is a :class:`ConfigError` naming
the file.

:mod:`puicl_common.configio` re-exports the public names, so callers import them from there.
This module imports neither torch nor numpy (PyYAML only when a file is read).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from puicl_common.config_errors import ConfigError
from puicl_common.config_errors import describe as _describe

__all__ = [
    "EXTENDS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_VALUES",
    "MAX_EXTENDS_CHAIN",
    "file_setting",
    "load_yaml",
    "merge_mappings",
]

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
