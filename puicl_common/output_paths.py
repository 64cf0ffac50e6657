"""Checks of where a command is asked to write, and one-line wording of file-system errors.

Command-line tools call :func:`check_output_path` before doing any work, so that an ``--out``
that can never be written (an existing file where a directory is wanted, a path below a
regular file, a path that goes up out of a folder that does not exist) is refused at once with
one line, instead of failing after minutes of work with a traceback; ``puicl_common.same_file``
refuses an output that is one of the command's own input files, comparing the paths as the
file system resolves them (:func:`resolved_output`). What cannot be known in advance (a
read-only file system, a full disk) still surfaces as an ``OSError``; :func:`os_error_message`
turns it into the same kind of line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from puicl_common.atomic import atomic_output, missing_before_up
from puicl_common.run_files import output_inside

__all__ = ["OutputPathError", "check_output_path", "os_error_message", "resolved_output",
           "save_figure", "write_failed"]


class OutputPathError(ValueError):
    """An output path that cannot be written; the message names it and why."""


def resolved_output(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Where a write to ``path`` lands, as the file system resolves it: links followed, each
    ``..`` taken from where the folder before it really is, missing folders as the writer
    creates them. Raises :class:`OutputPathError` for a path that goes up (``..``) out of a
    folder that does not exist, or out of a file (:func:`puicl_common.atomic.
    missing_before_up`): the kernel refuses it, and puicl's writers refuse it too."""
    before = missing_before_up(path)
    if before is not None:
        raise OutputPathError(f"{what} {path} goes up (..) out of {before}, which is not an "
                              "existing folder: spell the path without it")
    return Path(os.path.realpath(path))


def check_output_path(
    path: str | os.PathLike[str], kind: Literal["file", "directory"], what: str = "output"
) -> None:
    """Raise :class:`OutputPathError` if ``path`` cannot become a ``kind``.

    ``what`` names the path for the user (e.g. ``"--out"``). Only what the file system shows
    now is checked: a path that goes up out of a missing folder (:func:`resolved_output`), an
    existing entry of the wrong kind, or a regular file among its parents.
    """
    resolved_output(path, what)
    path = Path(path)
    if path.exists():
        if kind == "directory" and not path.is_dir():
            raise OutputPathError(
                f"{what} {path} is an existing file, not a directory: "
                "give a directory to write into"
            )
        if kind == "file" and path.is_dir():
            raise OutputPathError(f"{what} {path} is a directory: give a file name")
        return
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputPathError(
                    f"{what} {path} cannot be created: {parent} is a file, not a directory"
                )
            return


def os_error_message(err: OSError) -> str:
    """``err`` as one line: what failed on which path, without the errno prefix."""
    if err.strerror is None:  # raised with a message of its own
        return str(err)
    where = err.filename if err.filename is not None else ""
    if err.filename2 is not None:
        where = f"{where} -> {err.filename2}"
    return f"{where}: {err.strerror}" if where else err.strerror


def write_failed(target: str | os.PathLike[str], err: OSError) -> OutputPathError:
    """The error to raise when writing ``target`` failed with ``err``: it names the target the
    user gave, not the temporary file next to it that the atomic write was filling."""
    return OutputPathError(f"cannot write {target}: {err.strerror or err}")


def save_figure(figure: Any, path: Path, dpi: int, inside: Path | None = None) -> None:
    """Write a matplotlib figure to ``path`` atomically, in the format its suffix names (PNG
    without one), then close it; a write the file system refuses raises
    :class:`OutputPathError` naming ``path``. With ``inside`` (a run directory holding
    ``path``), the write follows no link there (:mod:`puicl_common.run_files`). Takes the
    figure, so this module needs no matplotlib of its own."""
    import matplotlib.pyplot as plt

    output = atomic_output(path) if inside is None else output_inside(path, inside)
    try:
        # the format from the name asked for: the temporary name's suffix is not a format
        with output as temporary:
            figure.savefig(temporary, dpi=dpi, format=path.suffix[1:].lower() or "png")
    except OSError as err:
        raise write_failed(path, err) from None
    finally:
        plt.close(figure)
