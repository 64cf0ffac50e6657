"""Files inside a run or shard directory: written without following links, read only when they
are regular files.

The trainer and ``prior-gen`` own the directories they write into (a run directory, a shard
directory): every file in them is theirs. Anything else found there was planted or copied in
(``cp -r`` and ``tar`` keep FIFOs and device nodes; a downloaded run may hold links):

* a symbolic link would make a write replace a file outside the directory;
* a character device would swallow a checkpoint;
* a FIFO would hang whoever opens it, reader or writer.

So inside these directories only regular files and folders are accepted, at start-up
(:func:`check_run_directory`) and again at every write and read, since an entry may be planted
while a command runs: :func:`write_bytes_inside` and :func:`output_inside` never follow a link
or write into anything but a regular file, :func:`open_append_inside` opens with
``O_NOFOLLOW``, and :func:`read_bytes_inside` opens without blocking and refuses what is not a
regular file. Each refusal is an :class:`UnsafeEntryError` naming the entry, in one line.

Paths a user names outside such a directory (an ``--out`` file, ``-o /dev/null``) are written
by :mod:`puicl_common.atomic`, which follows links and writes through devices as a shell does.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from puicl_common.atomic import fsync_directory

__all__ = ["UnsafeEntryError", "check_entry", "check_inside", "check_run_directory",
           "open_append_inside", "open_regular", "output_inside", "read_bytes_inside",
           "read_text_inside", "write_bytes_inside", "write_json_inside"]

# how to copy a run or shard directory so that it holds nothing refused here
_COPY_ADVICE = ("copy run and shard directories with cp -rP or rsync -a, which keep links as "
                "links, only from sources you trust")


class UnsafeEntryError(OSError):
    """An entry inside a run or shard directory that is neither a regular file nor a folder
    (a symbolic link, a FIFO, a device, a socket); the message names it. An ``OSError``, so
    that every command's handling of file-system errors reports it in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def _kind(path: Path, mode: int) -> str | None:
    """What an entry is, in words, where it is neither a regular file nor a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        try:
            return f"a symbolic link, {path} -> {os.readlink(path)}"
        except OSError:
            return f"a symbolic link, {path}"
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return f"{kind}, {path}"


def _refusal(path: Path, kind: str) -> UnsafeEntryError:
    return UnsafeEntryError(f"{path.parent} holds {kind}: files inside run and shard "
                            "directories are read and written only as regular files; remove "
                            f"it ({_COPY_ADVICE})")


def check_entry(path: str | os.PathLike[str]) -> None:
    """Raise :class:`UnsafeEntryError` if ``path`` is a link or anything but a regular file or
    a folder; a missing ``path`` is fine."""
    path = Path(path)
    try:
        status = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    kind = _kind(path, status.st_mode)
    if kind is not None:
        raise _refusal(path, kind)


def check_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> None:
    """:func:`check_entry` of ``path`` and of every folder between ``root`` (the directory the
    user named, which may itself be a link) and it."""
    path, root = Path(path), Path(root)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise ValueError(f"{path} does not lie inside {root}") from None
    entry = root
    for part in parts:
        entry = entry / part
        check_entry(entry)


def check_run_directory(directory: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UnsafeEntryError` naming the first entry inside ``directory`` that is not
    a regular file or a folder (the directory itself may be a link: the user named it).

    The trainer and ``prior-gen`` call it before they write anything, ``trainer export`` and
    ``trainer plot`` before they read a run: a refusal at start-up leaves everything as it
    was, where one in mid-run (:func:`write_bytes_inside`) ends the run.
    """
    root = Path(directory)
    if not root.is_dir():
        return
    for folder, subfolders, files in os.walk(root):  # does not descend into linked folders
        for name in sorted(subfolders + files):
            entry = Path(folder) / name
            try:
                status = os.lstat(entry)
            except FileNotFoundError:  # removed while the walk ran
                continue
            kind = _kind(entry, status.st_mode)
            if kind is not None:
                raise UnsafeEntryError(
                    f"{what} {root} holds {kind}: writes and reads inside it accept only "
                    f"regular files and folders; remove it ({_COPY_ADVICE})")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def output_inside(path: str | os.PathLike[str], root: str | os.PathLike[str],
                  suffix: str = "") -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to, renamed over ``path`` on success.

    ``path`` lies inside ``root``; it and the folders between them must be regular files and
    folders or absent (checked before the write and again before the rename). The rename
    replaces the entry at ``path`` itself, never what a link there would point to. On an
    exception the temporary file is removed and ``path`` is left as it was.
    """
    path, root = Path(path), Path(root)
    check_inside(path, root)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_CREAT | O_EXCL: the temporary name is new, never a link's target
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=suffix, dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(temporary, mode)
        check_inside(path, root)  # an entry planted while the content was written
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_bytes_inside(path: str | os.PathLike[str], data: bytes,
                       root: str | os.PathLike[str]) -> None:
    """Write ``data`` to ``path`` inside ``root`` atomically, following no link
    (:func:`output_inside`)."""
    with output_inside(path, root) as temporary:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())


def write_json_inside(path: str | os.PathLike[str], payload: Any,
                      root: str | os.PathLike[str]) -> None:
    """``payload`` as JSON (one-space indent, sorted keys, final newline), as
    :func:`puicl_common.atomic.atomic_write_json` writes it, inside ``root``."""
    text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
    write_bytes_inside(path, text.encode("utf-8"), root)


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = 0o666,
                 follow: bool = False) -> int:
    """A descriptor of ``path`` opened with ``flags``, without blocking (a FIFO's open waits
    for its other end) and, unless ``follow``, without following a final link; an
    :class:`UnsafeEntryError` naming ``path`` unless it is a regular file."""
    path = Path(path)
    try:
        # refused before it is opened: opening a device may act on it
        before = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        before = None
    if before is not None and not stat.S_ISDIR(before.st_mode):
        kind = _kind(path, before.st_mode)
        if kind is not None:
            raise _refusal(path, kind)
    extra = os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags | extra, mode)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EMLINK):
            # a link (ELOOP; EMLINK on some BSDs), or a FIFO without a reader (ENXIO)
            check_entry(path)
        raise
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
        raise _refusal(path, _kind(path, status.st_mode) or "not a regular file")
    # a regular file ignores O_NONBLOCK; cleared anyway, so that its stream behaves as usual
    os.set_blocking(descriptor, True)
    return descriptor


def open_append_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> TextIO:
    """``path`` inside ``root`` opened to append UTF-8 text, created if missing; refused
    unless it is a regular file (a link at ``path`` is refused, not followed)."""
    path, root = Path(path), Path(root)
    check_inside(path, root)
    descriptor = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return os.fdopen(descriptor, "a", encoding="utf-8")


def read_bytes_inside(path: str | os.PathLike[str], follow: bool = False) -> bytes:
    """The bytes of the regular file ``path``: a link (unless ``follow``: a path the user
    named), a FIFO, a device or a socket there is refused naming it, without waiting on it; a
    missing file raises ``FileNotFoundError``."""
    with os.fdopen(open_regular(path, os.O_RDONLY, follow=follow), "rb") as stream:
        return stream.read()


def read_text_inside(path: str | os.PathLike[str]) -> str:
    """:func:`read_bytes_inside` decoded as UTF-8; bytes that are not UTF-8 raise a
    ``ValueError`` naming ``path``."""
    data = read_bytes_inside(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})") \
            from None
