"""What a saved PUICL classifier folder is, for whoever writes one and whoever reads one
(``PUICLClassifier.save`` / ``load``, ``puicl predict --save-model DIR`` / ``--model DIR``).

One definition, so that the writer and the reader agree on it: a folder is a saved classifier
when its ``manifest.json`` is a regular file holding this format's manifest, intact (its own
checksum matches), and listing only the names a save writes (:data:`FILES`), each confined to
the folder. A save replaces such a folder only when it holds nothing else: a folder that holds
any other file (a table, notes, another command's outputs) is refused whole, as is any other
non-empty folder, a link, or a folder that holds the current working directory.

A save is written in a staging folder beside its target and swapped into place in one step
(``renameat2(RENAME_EXCHANGE)`` where the system has it; two renames otherwise), so that the
target's path names the old folder or the whole new one. The staging and moved-aside folders are
named after the host and process that made them: a later save to the same folder removes those
of a process that no longer runs (one killed mid-save), so they never pile up.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from puicl_common.atomic import fsync_directory, missing_before_up

__all__ = ["ARRAYS", "CONTEXTS", "FILES", "FORMAT", "FORMAT_VERSION", "MANIFEST", "STATE",
           "VERSIONS", "WEIGHTS", "WITHOUT_TRAINING_DATA_VERSION", "WITH_TABLE_VERSIONS",
           "SavedModelError", "changed_libraries", "check_replaceable", "discard", "entry_kind",
           "folder_files", "library_versions", "manifest_for", "publish", "read_manifest",
           "stage"]

FORMAT = "puicl-classifier"
# a folder with its training table, and one without it (its contexts' caches instead). Versions
# 3 and 4 name classes by stable type tags (puicl_model.estimator.saved_state.TYPES); 1 and 2,
# which name them by module paths, are still read
FORMAT_VERSION = 3
WITHOUT_TRAINING_DATA_VERSION = 4
WITH_TABLE_VERSIONS = (1, FORMAT_VERSION)
VERSIONS = (1, 2, FORMAT_VERSION, WITHOUT_TRAINING_DATA_VERSION)
MANIFEST, STATE, ARRAYS, WEIGHTS = "manifest.json", "state.json", "arrays.safetensors", "weights"
CONTEXTS = "contexts.safetensors"
# every name a manifest may list: what save writes (weights/: puicl_model.net.weights)
FILES = frozenset({STATE, ARRAYS, CONTEXTS, f"{WEIGHTS}/model.safetensors",
                   f"{WEIGHTS}/config.json"})
_REQUIRED = {version: FILES - {CONTEXTS} if version in WITH_TABLE_VERSIONS else FILES
             for version in VERSIONS}
_MANIFEST_BYTES = 1 << 16  # a manifest lists five names and digests: a few hundred bytes


class SavedModelError(ValueError):
    """A saved classifier that cannot be loaded (damaged, of another format, unsupported), or
    a folder a save may not replace."""


def library_versions() -> dict[str, str]:
    """The versions of what a saved classifier's scores depend on: puicl, numpy,
    scikit-learn (the learners) and torch (the model)."""
    import numpy as np
    import sklearn
    import torch

    from puicl_common import __version__

    return {"puicl": __version__, "numpy": np.__version__, "scikit-learn": sklearn.__version__,
            "torch": torch.__version__}


def manifest_for(files: dict[str, str], version: int,
                 libraries: dict[str, str] | None = None) -> dict[str, Any]:
    """The manifest of a folder holding ``files`` (name -> sha256) and written under
    ``libraries`` (:func:`library_versions`; folders saved before they were recorded have
    none), with its own checksum."""
    body: dict[str, Any] = {"format": FORMAT, "version": version, "files": files}
    if libraries is not None:
        body["libraries"] = libraries
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {**body, "checksum": digest}


def changed_libraries(manifest: dict[str, Any]) -> str | None:
    """The libraries whose version differs from the one the folder was saved under, as
    "name saved → now" joined by commas; None where none does or none was recorded."""
    saved = manifest.get("libraries")
    if not isinstance(saved, dict):
        return None
    now = library_versions()
    changed = [f"{name} {saved[name]!s:.20} → {now[name]}" for name in sorted(now)
               if name in saved and saved[name] != now[name]]
    return ", ".join(changed) or None


def entry_kind(path: Path) -> str | None:
    """What stands at ``path`` where it is not the regular file a save writes, in words
    ("missing", "a link", "a FIFO", "a folder", ...); None for a regular file. Looked at
    without following a link or opening anything (a FIFO would block its reader)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as err:  # (a file among its folders, no permission, ...)
        return f"unreadable ({err.strerror or err})"
    kinds = ((stat.S_ISREG, None), (stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), "a device")


def _manifest_text(directory: Path, path: Path) -> str:
    """The manifest's text, or :class:`SavedModelError` naming what stands there instead (no
    manifest, a link, a FIFO, a folder, an oversized file, text that is not UTF-8)."""
    folder = entry_kind(directory)
    if folder not in ("a folder", "a link", "missing"):  # (a link to a folder is read)
        raise SavedModelError(f"{directory} is {folder or 'a file'}, not a folder: not a "
                              "saved PUICL classifier")
    kind = entry_kind(path)
    if kind == "missing" or (kind or "").startswith("unreadable (Not a directory"):
        raise SavedModelError(f"{directory} holds no {MANIFEST} file: not a saved PUICL "
                              "classifier")
    if kind is not None:
        raise SavedModelError(f"{path} is {kind}, not the file a save writes: not a saved "
                              "PUICL classifier")
    try:
        with path.open("rb") as file:
            data = file.read(_MANIFEST_BYTES + 1)
    except OSError as err:
        raise SavedModelError(f"{path}: cannot read it ({err.strerror or err})") from None
    if len(data) > _MANIFEST_BYTES:
        raise SavedModelError(f"{path} is larger than {_MANIFEST_BYTES >> 10} KB: not the "
                              "manifest puicl wrote (a few hundred bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SavedModelError(f"{path} is not UTF-8 text: not the manifest puicl "
                              "wrote") from None


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of the saved classifier in ``directory``, checked as the module says
    (not the files it lists: :func:`puicl_model.estimator.saved_model.load` hashes them)."""
    path = directory / MANIFEST
    text = _manifest_text(directory, path)
    try:
        manifest = json.loads(text)
        body = {key: manifest[key] for key in ("format", "version", "files")}
        libraries = manifest.get("libraries")
        intact = (isinstance(body["files"], dict)
                  and (libraries is None or (isinstance(libraries, dict) and all(
                      isinstance(v, str) for v in libraries.values())))
                  and manifest["checksum"] == manifest_for(body["files"], body["version"],
                                                           libraries)["checksum"])
    except (ValueError, KeyError, TypeError, RecursionError):
        intact = False
    if not intact:
        raise SavedModelError(f"{path}: damaged (not the manifest puicl wrote)")
    version = body["version"]
    if type(version) is not int:  # (not "3", 3.0 or true, which would pass for 3 and 1)
        raise SavedModelError(f"{path}: a version of type {type(version).__name__} "
                              f"({version!r:.20}), not a whole number: not the manifest puicl "
                              "wrote")
    if body["format"] != FORMAT or version not in VERSIONS:
        raise SavedModelError(f"{path}: format {body['format']!s:.40} version "
                              f"{version}; this puicl reads {FORMAT} versions "
                              f"{', '.join(map(str, VERSIONS))}")
    names = set(body["files"])
    # names are compared, never opened: a name outside the folder is not even looked up
    strange = sorted(names - FILES, key=repr)
    if strange:
        raise SavedModelError(f"{path} lists {str(strange[0])[:80]!r}, which is not a file of "
                              "a saved PUICL classifier")
    required = _REQUIRED[body["version"]]
    if names != required:  # (the caches go with version 2 alone)
        raise SavedModelError(f"{path}: version {body['version']} lists "
                              f"{', '.join(sorted(names))}, not {', '.join(sorted(required))}")
    if not all(isinstance(digest, str) and len(digest) == 64 for digest in
               body["files"].values()):
        raise SavedModelError(f"{path}: damaged (not the manifest puicl wrote)")
    return manifest


def folder_files(directory: Path) -> dict[str, Path]:
    """Every file a saved classifier in ``directory`` may consist of, named for the user,
    whether or not they exist (for the check that no output overwrites one)."""
    return {f"the saved classifier's {name}": directory / name
            for name in sorted(FILES | {MANIFEST})}


def _holds_cwd(directory: Path) -> bool:
    here, there = Path(os.path.realpath(os.getcwd())), Path(os.path.realpath(directory))
    return here == there or there in here.parents


def check_replaceable(directory: Path) -> None:
    """Refuse (:class:`SavedModelError`) a ``directory`` a save may not write: anything but a
    missing path, an empty folder, or a saved classifier holding nothing else; and a path
    that goes up (``..``) out of a folder that does not exist, which names no folder until
    the save creates that one (:func:`puicl_common.atomic.missing_before_up`)."""
    before = missing_before_up(directory)
    if before is not None:
        raise SavedModelError(f"{directory} goes up (..) out of {before}, which is not an "
                              "existing folder: spell the path without it")
    if not os.path.lexists(directory):
        return
    what = f"{directory} exists and is not a saved PUICL classifier"
    if directory.is_symlink():
        raise SavedModelError(f"{directory} is a link; give the folder itself")
    if not directory.is_dir():
        raise SavedModelError(f"{what}; give a new folder")
    if _holds_cwd(directory):
        raise SavedModelError(f"{directory} holds the current folder, which a save would "
                              "replace; give a folder of its own")
    entries = sorted(directory.iterdir())
    if not entries:
        return
    try:
        listed = set(read_manifest(directory)["files"])
    except SavedModelError:
        raise SavedModelError(f"{what}; give a new folder") from None
    own = {directory / MANIFEST, directory / WEIGHTS} | {directory / name for name in listed}
    for entry in entries + sorted((directory / WEIGHTS).iterdir()
                                  if (directory / WEIGHTS).is_dir() else []):
        if entry not in own or entry.is_symlink():
            raise SavedModelError(f"{directory} holds {entry.name}, which a saved PUICL "
                                  "classifier does not: a save would delete it; move it out "
                                  "or give a new folder")


# ------------------------------------------------------------------------ staging and swap
def _tag() -> str:
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{host}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or no pid at all: left alone
    return True


def _clean_stale(directory: Path) -> None:
    """Remove this host's staging and moved-aside folders of ``directory`` left by processes
    that no longer run (a save killed midway)."""
    host = _tag().split("-")[0]
    prefixes = tuple(f".{directory.name}.{kind}-{host}-" for kind in ("tmp", "old"))
    for leftover in directory.parent.iterdir():  # (not glob: the name may hold "[" or "*")
        prefix = next((p for p in prefixes if leftover.name.startswith(p)), None)
        if prefix is None:
            continue
        pid = leftover.name[len(prefix):].split("-")[0]
        if (pid.isdigit() and not _alive(int(pid)) and leftover.is_dir()
                and not leftover.is_symlink()):
            shutil.rmtree(leftover, ignore_errors=True)


def stage(directory: Path) -> Path:
    """A new, empty staging folder beside ``directory`` (created with its missing parents);
    leftovers of killed saves removed first."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(directory)
    return Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-{_tag()}-",
                                 dir=directory.parent))


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def _open_to_umask(staging: Path) -> None:
    """The modes a plain ``mkdir`` and ``open`` give under the umask: a staging folder is
    created 0700 and some writers create files 0600, which would keep the saved classifier
    from a team that shares the folder."""
    mask = os.umask(0)
    os.umask(mask)
    for path in [staging, *staging.rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~mask)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (Linux's renameat2); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def publish(staging: Path, directory: Path) -> None:
    """Put the finished ``staging`` at ``directory``: a saved classifier there is swapped out
    and removed; ``directory`` is checked again first, as it may have changed since the save
    began."""
    _open_to_umask(staging)
    check_replaceable(directory)
    aside = None
    if directory.is_dir() and any(directory.iterdir()):
        if _exchange(staging, directory):
            aside = staging
        else:  # moved aside within its own parent, so its ".." entry stays as it is
            aside = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-{_tag()}-",
                                          dir=directory.parent))
            os.replace(directory, aside)
            os.replace(staging, directory)
    else:
        os.replace(staging, directory)  # (over an empty folder, too)
    fsync_directory(directory.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
