"""Models checked and built from weights files, kept for the process by the sha256 of the
files' bytes.

A classifier loads its weights on every ``fit``: on a table of the paper's size, reading the
file, verifying it and building the model took about 15 ms of a 100 ms fit on a CPU core
(docs/performance.md, "Weights checked once a process"). A model is kept under the digests of
the files it was built from, so a file changed in any byte is another key, read and checked
afresh; the caller hands out copies, so that no one's change to a model reaches another's.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import torch

__all__ = ["KeptModels", "file_sha256"]


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time (a large file is not held);
    "" where there is no such file. Raises OSError where it cannot be read."""
    if not path.is_file():
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class KeptModels:
    """At most ``most`` models, under the digests of their files, the least recently used
    dropped first; safe to share between threads."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._models: OrderedDict[tuple[str, ...], torch.nn.Module] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(files: Sequence[Path]) -> tuple[str, ...]:
        return tuple(file_sha256(path) for path in files)

    def get(self, key: tuple[str, ...]) -> torch.nn.Module | None:
        with self._lock:
            model = self._models.get(key)
            if model is not None:
                self._models.move_to_end(key)
            return model

    def keep(self, key: tuple[str, ...], model: torch.nn.Module) -> None:
        with self._lock:
            self._models[key] = model
            while len(self._models) > self.most:
                self._models.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()

    def __len__(self) -> int:
        return len(self._models)
