"""File-system helpers: content digests, temp names and the writer lock.

A shard (a file, or a directory for zarr) is written under a temporary name in its final
directory and renamed into place, so a killed run never leaves a half-written shard under a
final name. The temporary names carry ``TEMP_MARK`` so a later run can remove the leftovers.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from puicl_common.atomic import fsync_directory
from puicl_common.run_files import check_entry, open_regular

__all__ = [
    "TEMP_MARK",
    "WriterLock",
    "WriterLockedError",
    "digest_path",
    "publish",
    "remove_path",
    "remove_temporaries",
    "temp_path",
]

TEMP_MARK = ".tmp-"


def temp_path(final: Path) -> Path:
    """A unique temporary sibling of ``final`` (same directory, so rename is atomic)."""
    return final.with_name(f".{final.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def remove_path(path: Path) -> None:
    """Remove a file or a directory tree; a missing path is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):
        # it became a directory after the check: a store's writer thread, still running when
        # an interrupt unwinds the main thread, created it
        if not path.is_dir():
            raise
        shutil.rmtree(path, ignore_errors=True)


def publish(tmp: Path, final: Path) -> None:
    """Move a finished temporary file or directory to its final name (replacing any old one)."""
    if tmp.is_dir() and final.exists():
        # a directory cannot replace one in one step: move the old one aside first
        trash = temp_path(final)
        os.rename(final, trash)
        os.rename(tmp, final)
        remove_path(trash)
    else:
        os.replace(tmp, final)
    fsync_directory(final.parent)


def remove_temporaries(root: Path) -> None:
    """Delete leftovers of killed runs under ``root``."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            if name.startswith(".") and TEMP_MARK in name:
                remove_path(Path(dirpath) / name)
        dirnames[:] = [d for d in dirnames if TEMP_MARK not in d]


def _files(path: Path) -> Iterator[tuple[str, Path]]:
    """The files of ``path`` (itself, or a directory's, below it): inside a directory each
    must be a regular file or a folder (``puicl_common.run_files``), so that a FIFO planted in
    a zarr shard is refused, not read forever."""
    if path.is_file():
        yield path.name, path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            check_entry(full)
            yield full.relative_to(path).as_posix(), full


def stored_bytes(path: Path) -> int:
    """Total bytes of a file, or of a directory's files: what ``digest_path`` counts."""
    return sum(full.stat().st_size for _, full in _files(path))


def digest_path(path: Path) -> tuple[str, int]:
    """(sha256 hex, total bytes) of a file, or of a directory's files with their names."""
    digest = hashlib.sha256()
    total = 0
    directory = path.is_dir()
    for name, full in _files(path):
        if directory:
            digest.update(name.encode() + b"\0")
        # without blocking on a FIFO; ``path`` itself may be a link the user named (a corpus)
        descriptor = open_regular(full, os.O_RDONLY, follow=full == path)
        with os.fdopen(descriptor, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                total += len(chunk)
    return digest.hexdigest(), total


class WriterLockedError(RuntimeError):
    """Another prior-gen process is writing into the same output directory."""


class WriterLock:
    """An exclusive ``flock`` on ``DIR/.prior-gen.lock`` held while a run writes into DIR.

    The kernel releases it when the holder dies (even by SIGKILL), so a stale lock file never
    blocks a rerun. ``flock`` is advisory and may not work across NFS clients: run one writer
    per directory (the dask backend drives many machines from one writer).
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / ".prior-gen.lock"
        self._fd: int | None = None

    def __enter__(self) -> WriterLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        # never truncated through a link, nor opened as a FIFO (puicl_common.run_files)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "unknown process"
            os.close(fd)
            raise WriterLockedError(
                f"another prior-gen is writing into {self.path.parent} ({holder}); wait for it "
                "to finish or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
