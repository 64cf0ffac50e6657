"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Every writer of a result the project keeps (shard manifests, checkpoints, weights, benchmark
results, predictions, compiled kernels) goes through here: the data is written to a temporary
file in the target's folder, flushed to disk, renamed over the target, and the rename itself
is made durable. A process killed at any moment leaves either the previous file or the new
one, plus at most a temporary file named ``.NAME.tmp-*`` (``prior_gen.shards.storage`` cleans
those up).

What the target already is decides how it is written, so that a write never changes what kind
of thing stands at the path:

* a symbolic link is followed: the file it points to is replaced atomically (created if the
  link dangles), and the link stays;
* an existing regular file keeps its permission bits (and, where allowed, its owner);
* a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe) is written
  through, like a shell's ``>``: renaming over it would put a regular file in its place, and
  the FIFO's reader would wait forever. Such a write is not atomic;
* a directory, a block device or a socket is refused with an :class:`OSError`.

Missing folders on the way are created, as ``mkdir -p`` would; a path that goes up (``..``)
out of a folder that does not exist yet is refused (:func:`missing_before_up`), as the kernel
refuses it: creating that folder first would let the write land wherever the ``..`` leads,
past every check made on the path as spelled.

:func:`atomic_write_files` writes several files as a group: each is written whole before any
is put in place, so that a write that fails (a full disk) leaves none of them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["atomic_output", "atomic_write_bytes", "atomic_write_files", "atomic_write_json",
           "atomic_write_text", "fsync_directory", "missing_before_up"]


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


def _up_out_of_missing(path: str) -> str | None:
    parts = Path(path).parts
    for index, part in enumerate(parts):
        if part == ".." and index > 0:
            before = os.path.join(*parts[:index])
            if not os.path.isdir(before):  # (through links, as the kernel walks it)
                return before
    return None


def missing_before_up(path: str | os.PathLike[str]) -> str | None:
    """The part of ``path`` before a ``..`` that is not an existing folder (missing, or a
    file), as spelled; None where every ``..`` goes up out of an existing folder. A link at
    ``path`` that leads nowhere is followed, and what it names is looked at likewise.

    The kernel refuses such a path (ENOENT, ENOTDIR); a writer that first creates the missing
    folders would instead reach whatever the ``..`` leads to once they exist: ``new/../t.csv``
    is ``t.csv``, which a check of the path as spelled (it does not exist yet) never saw."""
    spelled = os.fspath(path)
    for _ in range(40):  # (the kernel follows as many links, then gives up: ELOOP)
        before = _up_out_of_missing(spelled)
        if before is not None or os.path.exists(spelled) or not os.path.islink(spelled):
            return before
        # a link that leads nowhere yet: what a write through it would create
        spelled = os.path.join(os.path.dirname(spelled), os.readlink(spelled))
    return None


def _refuse_missing_before_up(path: Path) -> None:
    before = missing_before_up(path)
    if before is not None:
        raise FileNotFoundError(errno.ENOENT, f"goes up (..) out of {before}, which is not an "
                                "existing folder", str(path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _existing(path: Path) -> os.stat_result | None:
    """What stands at ``path`` once symbolic links are followed; None where nothing does."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _refuse(path: Path, status: os.stat_result) -> None:
    """Raise for a target that can be neither replaced nor written through."""
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
    kind = "a block device" if stat.S_ISBLK(status.st_mode) else (
        "a socket" if stat.S_ISSOCK(status.st_mode) else "not a regular file")
    raise OSError(errno.EINVAL, f"is {kind}; refusing to write to it", str(path))


def _keep_owner_and_mode(temporary: Path, status: os.stat_result) -> None:
    """Give the new file the replaced file's owner and permission bits."""
    if (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
        # only root (or a file of one's own group) may do this; elsewhere the writer owns it,
        # as it would after deleting and re-creating the file
        with contextlib.suppress(PermissionError):
            os.chown(temporary, status.st_uid, status.st_gid)
    # after chown, which clears set-id bits
    os.chmod(temporary, stat.S_IMODE(status.st_mode))


@contextlib.contextmanager
def _written_through(path: Path, suffix: str) -> Iterator[Path]:
    """A temporary file whose content is copied into the device or FIFO ``path`` on success.

    The temporary file lies in the system's temporary folder: a device's folder (``/dev``) is
    no place for it, and it never becomes ``path``.
    """
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=suffix)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb") as source, open(path, "wb") as sink:
            shutil.copyfileobj(source, sink)
    finally:
        temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; renamed over ``path`` on success.

    For writers that want a file name rather than bytes (``savefig``, ``to_csv``, a compiler's
    ``-o``). ``suffix`` lets such writers infer the format from the temporary name. On an
    exception the temporary file is removed and ``path`` is left as it was. Symbolic links,
    devices and FIFOs are handled as the module docstring says.
    """
    path = Path(path)
    _refuse_missing_before_up(path)
    status = _existing(path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        if not (stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode)):
            _refuse(path, status)
        with _written_through(path, suffix) as temporary:
            yield temporary
        return
    # the file a link points to is what gets replaced (a dangling link: what it names)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", suffix=suffix,
                                        dir=target.parent)
    except OSError as err:  # (a read-only place): named by the path asked for, not its
        raise OSError(err.errno, err.strerror, str(path)) from None  # temporary file's
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        if status is None:
            # mkstemp creates the file 0600; give it the permissions a plain open() would
            os.chmod(temporary, 0o666 & ~_umask())
        else:
            _keep_owner_and_mode(temporary, status)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)


def _write_synced(temporary: Path, data: bytes) -> None:
    with open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (module docstring)."""
    with atomic_output(path) as temporary:
        _write_synced(temporary, data)


def atomic_write_files(files: Mapping[str | os.PathLike[str], bytes]) -> None:
    """Write each of ``files`` (path -> content) atomically, as a group: every file is written
    whole to its temporary file before any is renamed into place, the first listed last. A
    write that fails removes every temporary file and leaves every path as it was (a rename
    that fails midway, which needs no space, leaves those before it in place)."""
    with contextlib.ExitStack() as group:
        # entered in order and left in reverse: the first file is put in place last
        for path, data in files.items():
            _write_synced(group.enter_context(atomic_output(path)), data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically, newlines unchanged."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as JSON (one-space indent, sorted keys, final newline) atomically."""
    atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
