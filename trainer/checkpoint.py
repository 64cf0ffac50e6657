"""Checkpoints of a run: atomic, checksummed, keep-last-K, loadable without unpickling code.

Layout, inside ``RUN/checkpoints/``:

* ``step_00001234.pt`` -- ``torch.save`` of a dict of tensors and plain values (model, EMA,
  optimizer, step, RNG states, counters, config and hashes); the step in the name is the
  number of completed steps, i.e. the next step to train.
* ``index.json`` -- the list of checkpoints with their step, size and sha256, newest last.

A checkpoint is written to a temporary name, fsynced and renamed, then the index is rewritten
the same way; a crash at any moment leaves either the previous state or the new one. Loading
verifies the sha256 from the index and reads with ``torch.load(weights_only=True)``, which
refuses anything but tensors and plain containers -- RNG states are stored as tensors and
lists for that reason. Auto-resume takes the newest checkpoint that verifies and falls back
to older ones (with a warning) if the newest is damaged.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from puicl_common.output_paths import os_error_message
from puicl_common.run_files import (
    UnsafeEntryError,
    read_bytes_inside,
    read_text_inside,
    write_bytes_inside,
)

CHECKPOINT_FORMAT = 1
INDEX_NAME = "index.json"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, damaged, or does not belong to this run."""


def capture_rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) generator states, as tensors and plain values."""
    version, internal, gauss_next = random.getstate()
    numpy_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": {
            "version": int(version),
            "internal": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": gauss_next,
        },
        "numpy": {
            "bit_generator": str(numpy_state["bit_generator"]),
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    py = state["python"]
    internal = tuple(int(v) for v in py["internal"].tolist())
    random.setstate((py["version"], internal, py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": npy["bit_generator"],
            "state": {"key": npy["key"].numpy().astype(np.uint32), "pos": npy["pos"]},
            "has_gauss": npy["has_gauss"],
            "gauss": npy["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_name(step: int) -> str:
    return f"step_{step:08d}.pt"


# what checkpoint_name writes (steps of more than 8 digits just widen the number)
STEP_FILE = re.compile(r"step_(\d{8,})\.pt")


def _read_payload(data: bytes, path: Path) -> dict[str, Any]:
    """The checkpoint dict in ``data`` (read from ``path``), tensors and plain values only."""
    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for damaged/foreign files
        raise CheckpointError(f"cannot read checkpoint {path}: {err}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a trainer checkpoint of format {CHECKPOINT_FORMAT}")
    return payload


class CheckpointStore:
    """The checkpoints of one run directory."""

    def __init__(self, directory: str | Path, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    @property
    def index_path(self) -> Path:
        return self.directory / INDEX_NAME

    def entries(self) -> list[dict[str, Any]]:
        """Index entries, oldest first (empty when the run has no checkpoint yet).

        Every entry is checked before use: its file must be the step file of its step,
        directly in this directory. The index decides which files :meth:`save` deletes, so
        an entry naming anything else (``../x``, an absolute path) makes the whole index
        unusable rather than being followed. Without an index, step files already in the
        directory are indexed again (:meth:`rebuild_index`).
        """
        try:
            text = read_text_inside(self.index_path)
        except FileNotFoundError:
            return self.rebuild_index() if self.step_files() else []
        except ValueError as err:  # not UTF-8
            raise CheckpointError(f"{err}; {self._rebuild_hint()}") from None
        try:
            entries = json.loads(text)["checkpoints"]
            if not isinstance(entries, list):
                raise TypeError(f"'checkpoints' is a {type(entries).__name__}, not a list")
        except (ValueError, KeyError, TypeError) as err:
            raise CheckpointError(
                f"{self.index_path} is damaged ({err}); {self._rebuild_hint()}"
            ) from None
        for entry in entries:
            self._check_entry(entry)
        return sorted(entries, key=lambda e: e["step"])

    def _rebuild_hint(self) -> str:
        return (
            f"delete it, and the next trainer command rebuilds it from the step files in "
            f"{self.directory} that load"
        )

    def _check_entry(self, entry: Any) -> None:
        """Refuse an index entry that is not one of this directory's step files."""
        step = entry.get("step") if isinstance(entry, dict) else None
        valid_step = isinstance(step, int) and not isinstance(step, bool) and step >= 0
        name = entry.get("file") if isinstance(entry, dict) else None
        if (
            not valid_step
            or name != checkpoint_name(step)
            or not isinstance(entry.get("sha256"), str)
        ):
            shown = name if isinstance(entry, dict) else entry
            raise CheckpointError(
                f"{self.index_path} lists {shown!r}, which is not a checkpoint of this run "
                "(a step_NNNNNNNN.pt file matching its step, with its sha256, directly in "
                f"{self.directory}); nothing was deleted or loaded: {self._rebuild_hint()}"
            )

    def step_files(self) -> list[Path]:
        """The files of this directory named like checkpoints, in step order."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            match = STEP_FILE.fullmatch(path.name)
            # exactly checkpoint_name's spelling: step_000000012.pt is not step 12's file
            if match and path.name == checkpoint_name(int(match.group(1))) and path.is_file():
                found.append((int(match.group(1)), path))
        return [path for _, path in sorted(found)]

    def rebuild_index(self) -> list[dict[str, Any]]:
        """Index the step files that load as checkpoints of their step; returns the entries.

        For a run whose index was deleted (or moved aside when damaged). Each file is read
        the way :meth:`load` reads one without a checksum (weights only, format, and its
        ``step`` matching its name); files that fail are left out with a warning. Their
        sha256 from now on guards them like those of an index the trainer wrote.
        """
        entries, refused = [], []
        for path in self.step_files():
            data = read_bytes_inside(path)
            step = int(path.name[len("step_") : -len(".pt")])
            try:
                payload = _read_payload(data, path)
                if payload.get("step") != step:
                    raise CheckpointError(f"{path} holds step {payload.get('step')}")
            except CheckpointError as err:
                refused.append(str(err))
                continue
            entries.append(
                {
                    "file": path.name,
                    "step": step,
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        if not entries:
            raise CheckpointError(
                f"{self.index_path} is missing and none of the step files in "
                f"{self.directory} can be read ({'; '.join(refused)})"
            )
        try:
            self._write_index(entries)
        except OSError as err:
            raise CheckpointError(
                f"{self.index_path} is missing and cannot be rebuilt ({os_error_message(err)})"
            ) from None
        skipped = f"; left out (cannot be read): {'; '.join(refused)}" if refused else ""
        warnings.warn(
            f"{self.index_path} was missing: rebuilt it from the step files of steps "
            f"{[e['step'] for e in entries]}{skipped}",
            stacklevel=3,
        )
        return entries

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        index = {"format": CHECKPOINT_FORMAT, "checkpoints": entries}
        write_bytes_inside(self.index_path, (json.dumps(index, indent=1) + "\n").encode(),
                           self.directory.parent)

    def save(self, step: int, payload: dict[str, Any]) -> Path:
        """Write the checkpoint of ``step`` and drop all but the newest ``keep``.

        A write that fails (a full disk, a read-only file system) raises CheckpointError and
        leaves the previous checkpoints and their index as they were.
        """
        buffer = io.BytesIO()
        torch.save({"format": CHECKPOINT_FORMAT, "step": step, **payload}, buffer)
        data = buffer.getvalue()
        path = self.directory / checkpoint_name(step)
        previous = self.entries()
        try:
            write_bytes_inside(path, data, self.directory.parent)
        except UnsafeEntryError:
            raise  # its own advice: "make room" would be wrong
        except OSError as err:
            raise self._write_error(step, err) from None
        entries = [e for e in previous if e["step"] != step]
        entries.append(
            {
                "file": path.name,
                "step": step,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        entries.sort(key=lambda e: e["step"])
        kept, dropped = entries[-self.keep :], entries[: -self.keep]
        try:
            self._write_index(kept)
        except OSError as err:
            if all(e["step"] != step for e in previous):
                # unlisted, it would only take space: the old index does not know it
                path.unlink(missing_ok=True)
            if isinstance(err, UnsafeEntryError):
                raise
            raise self._write_error(step, err) from None
        for entry in dropped:
            # the name is made from the checked step, never taken from the index as written
            (self.directory / checkpoint_name(entry["step"])).unlink(missing_ok=True)
        return path

    def _write_error(self, step: int, err: OSError) -> CheckpointError:
        return CheckpointError(
            f"cannot write the checkpoint of step {step} in {self.directory} "
            f"({os_error_message(err)}); the checkpoints written before are intact: make room "
            "and start the same command again to continue from the newest"
        )

    def load(self, path: str | Path) -> dict[str, Any]:
        """Read and verify one checkpoint file."""
        path = Path(path)
        inside = path.parent.resolve() == self.directory.resolve()
        try:
            # a file named by --resume elsewhere may be a link the user made
            data = read_bytes_inside(path, follow=not inside)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {path} does not exist") from None
        entry = next(
            (e for e in self.entries() if e["file"] == path.name) if inside else iter(()),
            None,
        )
        if entry is not None and hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise CheckpointError(
                f"checkpoint {path} is damaged: its sha256 differs from the one recorded in "
                f"{self.index_path}"
            )
        if entry is None:
            warnings.warn(
                f"{path} is not listed in {self.index_path}; loading it without a checksum",
                stacklevel=2,
            )
        return _read_payload(data, path)

    def latest(self) -> tuple[Path, dict[str, Any]] | None:
        """The newest checkpoint that verifies, or None if the run has none."""
        entries = self.entries()
        for entry in reversed(entries):
            path = self.directory / entry["file"]
            try:
                return path, self.load(path)
            except CheckpointError as err:
                warnings.warn(f"skipping checkpoint: {err}", stacklevel=2)
        if entries:
            raise CheckpointError(
                f"no checkpoint listed in {self.index_path} can be read; "
                "start a new run directory or pass --resume PATH"
            )
        return None
