"""WebDataset shards: one POSIX tar file per shard of consecutive steps.

Each task is one WebDataset sample (key ``t{index:09d}``, members in training order):
``KEY.x.blosc`` (Blosc frame of float32 x, C order), ``KEY.y.blosc`` (int8 y) and
``KEY.json`` (the task's metadata, which holds n_rows / n_features / n_labeled), so standard
WebDataset tools can stream the tasks. A last member ``__index__`` (JSON; WebDataset readers
skip such names) lists, per task, the byte offset, size and CRC-32 of each member; the manifest
records where that index lies, so the reader fetches a whole step with one read and checks every
member's CRC. Tar headers are written with fixed owner, mode and mtime so the same tasks always
give the same bytes.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from prior_gen.config import ShardConfig
from prior_gen.shards.errors import ShardCorruptError
from prior_gen.task import Task

__all__ = ["INDEX_MEMBER", "TarShard", "write_tar_shard"]

INDEX_MEMBER = "__index__"  # webdataset skips members named __...__
_SHUFFLE = {"byte": 1, "bit": 2, "none": 0}


def _codec(config: ShardConfig, typesize: int):
    from numcodecs import Blosc

    shuffle = _SHUFFLE[config.shuffle] if typesize > 1 else 0
    return Blosc(cname=config.compressor, clevel=config.level, shuffle=shuffle)


_BLOCK = 512


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def _header(name: str, size: int) -> bytes:
    """A POSIX ustar header (mode 0644, owner 0, mtime 0): fixed bytes for fixed input."""
    encoded = name.encode()
    if len(encoded) >= 100:
        raise ValueError(f"tar member name too long: {name}")
    fields = [
        encoded.ljust(100, b"\0"),
        _octal(0o644, 8),
        _octal(0, 8),
        _octal(0, 8),
        _octal(size, 12),
        _octal(0, 12),
        b" " * 8,  # checksum placeholder
        b"0",  # regular file
        b"\0" * 100,
        b"ustar\x0000",
        b"\0" * (32 + 32 + 8 + 8 + 155 + 12),
    ]
    header = bytearray(b"".join(fields))
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


class _TarBuilder:
    """Builds a tar archive in memory (much faster than tarfile for thousands of members)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.offset = 0

    def add(self, name: str, payload: bytes) -> tuple[int, int, int]:
        """Append a member; returns (data offset, size, CRC-32) for the index."""
        size = len(payload)
        self.parts += [_header(name, size), payload, b"\0" * (-size % _BLOCK)]
        data_at = self.offset + _BLOCK
        self.offset = data_at + size + (-size % _BLOCK)
        return data_at, size, zlib.crc32(payload)

    def finish(self) -> bytes:
        return b"".join([*self.parts, b"\0" * (2 * _BLOCK)])


def write_tar_shard(
    path: Path, steps: list[list[Task]], config: ShardConfig, attributes: dict[str, Any]
) -> dict[str, Any]:
    """Write ``steps`` as a tar file at ``path``; returns {"index": [offset, size]}."""
    float_codec, byte_codec = _codec(config, 4), _codec(config, 1)
    archive = _TarBuilder()
    entries = []
    for step in steps:
        for task in step:
            key = f"t{task.meta['index']:09d}"
            x = float_codec.encode(np.ascontiguousarray(task.x, np.float32))
            y = byte_codec.encode(np.ascontiguousarray(task.y, np.int8))
            meta = json.dumps(task.meta, separators=(",", ":"), allow_nan=False).encode()
            entries.append(
                {
                    "key": key,
                    "x": archive.add(f"{key}.x.blosc", bytes(x)),
                    "y": archive.add(f"{key}.y.blosc", bytes(y)),
                    "json": archive.add(f"{key}.json", meta),
                }
            )
    index = json.dumps({**attributes, "tasks": entries}, separators=(",", ":")).encode()
    offset, size, _ = archive.add(INDEX_MEMBER, index)
    with open(path, "wb") as handle:
        handle.write(archive.finish())
    return {"index": [offset, size]}


class TarShard:
    """An opened tar shard; reads the tasks of one of its steps with one contiguous read."""

    def __init__(self, path: Path, index_location: list[int], global_batch: int) -> None:
        self.path = path
        self.batch = global_batch
        offset, size = index_location
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                raw = handle.read(size)
            self.entries = json.loads(raw)["tasks"]
        except (OSError, ValueError, KeyError) as err:
            raise ShardCorruptError(path, f"cannot read its index: {err}") from err
        from numcodecs import Blosc

        self.codec = Blosc()

    def _member(self, blob: bytes, base: int, entry: list[int], what: str) -> bytes:
        offset, size, crc = entry
        payload = blob[offset - base : offset - base + size]
        if len(payload) != size or zlib.crc32(payload) != crc:
            raise ShardCorruptError(self.path, f"member {what} fails its CRC-32 check")
        return payload

    def read_step(self, local_step: int, start: int, stop: int) -> list[Task]:
        first = local_step * self.batch
        chosen = self.entries[first + start : first + stop]
        if not chosen:
            return []
        base = chosen[0]["x"][0]
        end = chosen[-1]["json"][0] + chosen[-1]["json"][1]
        try:
            with open(self.path, "rb") as handle:
                handle.seek(base)
                blob = handle.read(end - base)
        except OSError as err:
            raise ShardCorruptError(self.path, f"cannot read: {err}") from err
        tasks = []
        for entry in chosen:
            key = entry["key"]
            meta = json.loads(self._member(blob, base, entry["json"], f"{key}.json"))
            n, d = meta["n_rows"], meta["n_features"]
            x = np.empty((n, d), np.float32)
            y = np.empty(n, np.int8)
            try:
                self.codec.decode(self._member(blob, base, entry["x"], key), out=x)
                self.codec.decode(self._member(blob, base, entry["y"], key), out=y)
            except (RuntimeError, ValueError) as err:
                raise ShardCorruptError(self.path, f"task {key}: {err}") from err
            if y.shape[0] != n:
                raise ShardCorruptError(self.path, f"task {key}: y has {y.shape[0]} rows, not {n}")
            tasks.append(Task(x=x, y=y, n_labeled=meta["n_labeled"], meta=meta))
        return tasks
