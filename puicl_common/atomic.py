"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Every writer of a result the project keeps (shard manifests, checkpoints, weights, benchmark
results, predictions, compiled kernels) goes through here: the data is written to a temporary
file in the target's folder, flushed to disk, renamed over the target, and the rename itself
is made durable. A process killed at any moment leaves either the previous file or the new
one, plus at most a temporary file named ``.NAME.tmp-*`` (``prior_gen.storage`` cleans
those up).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_output", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "fsync_directory"]


def fsync_directory(directory: Path) -> None:
    """Make a rename inside ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename still happened
    finally:
        os.close(handle)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; renamed over ``path`` on success.

    For writers that want a file name rather than bytes (``savefig``, ``to_csv``, a compiler's
    ``-o``). ``suffix`` lets such writers infer the format from the temporary name. On an
    exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=suffix, dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        # mkstemp creates the file 0600; give it the permissions a plain open() would.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (module docstring)."""
    with atomic_output(path) as temporary, open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically, newlines unchanged."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as JSON (one-space indent, sorted keys, final newline) atomically."""
    atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
