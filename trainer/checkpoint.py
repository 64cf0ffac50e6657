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
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from puicl_common.atomic import atomic_write_bytes

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
        """Index entries, oldest first (empty when there is no index yet)."""
        try:
            text = self.index_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            index = json.loads(text)
            entries = index["checkpoints"]
        except (ValueError, KeyError, TypeError) as err:
            raise CheckpointError(
                f"{self.index_path} is damaged ({err}); delete it and pass "
                "--resume PATH to continue from a specific checkpoint file"
            ) from None
        return sorted(entries, key=lambda e: e["step"])

    def save(self, step: int, payload: dict[str, Any]) -> Path:
        """Write the checkpoint of ``step`` and drop all but the newest ``keep``."""
        buffer = io.BytesIO()
        torch.save({"format": CHECKPOINT_FORMAT, "step": step, **payload}, buffer)
        data = buffer.getvalue()
        path = self.directory / checkpoint_name(step)
        atomic_write_bytes(path, data)
        entries = [e for e in self.entries() if e["step"] != step]
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
        index = {"format": CHECKPOINT_FORMAT, "checkpoints": kept}
        atomic_write_bytes(self.index_path, (json.dumps(index, indent=1) + "\n").encode())
        for entry in dropped:
            (self.directory / entry["file"]).unlink(missing_ok=True)
        return path

    def load(self, path: str | Path) -> dict[str, Any]:
        """Read and verify one checkpoint file."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {path} does not exist") from None
        entry = next(
            (e for e in self.entries() if e["file"] == path.name)
            if path.parent.resolve() == self.directory.resolve()
            else iter(()),
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
        try:
            payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises several types for damaged/foreign files
            raise CheckpointError(f"cannot read checkpoint {path}: {err}") from None
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(
                f"{path} is not a trainer checkpoint of format {CHECKPOINT_FORMAT}"
            )
        return payload

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
