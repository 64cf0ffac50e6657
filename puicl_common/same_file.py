"""Whether two paths name one file, and the check that a command's outputs are none of its inputs.

A command that reads some files and writes others must never write over what it reads: the
result would replace its own input (a table, the weights it loaded) with no way back. Paths
are compared as the file system sees them, not as they are spelled: ``./t.csv``,
``dir/../t.csv``, a symbolic link and a hard link to ``t.csv`` are all ``t.csv``, and so is
``new/../t.csv`` although ``new`` does not exist yet (a writer that creates it reaches
``t.csv``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from puicl_common.output_paths import OutputPathError

__all__ = ["SameFileError", "refuse_output_among_inputs", "same_file"]


class SameFileError(OutputPathError):
    """An output that names one of the command's inputs, or another of its outputs."""


def _resolved(path: str | os.PathLike[str]) -> str:
    """``path`` as the file system resolves it, a missing folder as a writer creates it (so
    that ``new/../t.csv`` is ``t.csv``); the spelling itself where it cannot be resolved."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.fspath(path)


def _status(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)  # through links: what a read or a write reaches
    except (OSError, ValueError):  # (ValueError: a path with a NUL byte names nothing)
        return None


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether ``first`` and ``second`` name one file, through links and other spellings.

    Two existing paths are the same when they are one regular file (its device and inode: a
    hard link counts). A device or a FIFO is never "the same file": writing to ``/dev/null``
    or a terminal replaces nothing. Two paths that do not exist yet are the same when they
    resolve to one place (two outputs that would be written over each other); an existing path
    and a missing one never are. Each path is resolved first (:func:`_resolved`): a path
    spelled through a folder that does not exist yet is where its writer would land."""
    first, second = _resolved(first), _resolved(second)
    one, other = _status(first), _status(second)
    if one is not None and other is not None:
        return (stat.S_ISREG(one.st_mode) and stat.S_ISREG(other.st_mode)
                and os.path.samestat(one, other))
    if one is None and other is None:
        return first == second
    return False


def refuse_output_among_inputs(outputs: Mapping[str, str | os.PathLike[str] | None],
                               inputs: Mapping[str, str | os.PathLike[str] | None]) -> None:
    """Raise :class:`SameFileError` when an output names an input, or an earlier output.

    ``outputs`` and ``inputs`` map what the user calls each path (an option, such as
    ``"--output"``, or words such as ``"the bundled weights"``) to the path; None entries are
    skipped. Inputs are the files actually read (a checkpoint directory's files, not the
    directory). The message names both paths and is one line."""
    seen: list[tuple[str, Path]] = []
    for name, given in outputs.items():
        if given is None:
            continue
        path = Path(given)
        for other_name, other in inputs.items():
            if other is not None and same_file(path, other):
                raise SameFileError(f"{name} {given} is {other} ({other_name}), which this "
                                    f"command reads: writing {name} would overwrite it; write "
                                    "to another path")
        for other_name, other_path in seen:
            if same_file(path, other_path):
                raise SameFileError(f"{name} {given} is {other_path} ({other_name}): both "
                                    "would be written to one file; give each its own path")
        seen.append((name, path))
