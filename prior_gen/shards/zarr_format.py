"""Zarr v3 shards: one zarr group (a directory) per shard of consecutive steps.

Arrays ``x`` (float32), ``y`` (int8) and ``meta`` (uint8, JSON text) have one row per step and
one chunk per row: a step's tasks are concatenated (x row-major, task after task) and the row
is zero-padded to the longest step of the shard (the padding compresses to almost nothing).
The chunks of each array sit in one zarr shard file (sharding codec), each compressed with
Blosc and followed by a CRC-32C checksum, so a damaged chunk fails to decode. The group's
attributes hold the used length of every row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from prior_gen.config import ShardConfig
from prior_gen.shards.errors import ShardCorruptError
from prior_gen.task import Task

__all__ = ["ZarrShard", "write_zarr_shard"]

_SHUFFLE = {"byte": "shuffle", "bit": "bitshuffle", "none": "noshuffle"}


def _compressors(config: ShardConfig, typesize: int) -> list:
    from zarr.codecs import BloscCodec, Crc32cCodec

    blosc = BloscCodec(
        cname=config.compressor,
        clevel=config.level,
        shuffle=_SHUFFLE[config.shuffle] if typesize > 1 else "noshuffle",
        typesize=typesize,
    )
    return [blosc, Crc32cCodec()]


def _stack(rows: list[np.ndarray], dtype: type) -> np.ndarray:
    width = max(1, max(row.shape[0] for row in rows))
    out = np.zeros((len(rows), width), dtype)
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row
    return out


def encode_meta(tasks: list[Task]) -> np.ndarray:
    text = json.dumps([task.meta for task in tasks], separators=(",", ":"), allow_nan=False)
    return np.frombuffer(text.encode(), np.uint8)


def write_zarr_shard(
    path: Path, steps: list[list[Task]], config: ShardConfig, attributes: dict[str, Any]
) -> dict[str, Any]:
    """Write ``steps`` (lists of tasks) as a zarr group at ``path``; returns nothing extra."""
    import zarr
    from zarr.storage import LocalStore

    rows = {
        "x": [np.concatenate([t.x.reshape(-1) for t in step]) for step in steps],
        "y": [np.concatenate([t.y for t in step]) for step in steps],
        "meta": [encode_meta(step) for step in steps],
    }
    lengths = {name: [int(r.shape[0]) for r in values] for name, values in rows.items()}
    group = zarr.open_group(
        LocalStore(path), mode="w", zarr_format=3, attributes={**attributes, "lengths": lengths}
    )
    for name, dtype in (("x", np.float32), ("y", np.int8), ("meta", np.uint8)):
        data = _stack(rows[name], dtype)
        array = group.create_array(
            name,
            shape=data.shape,
            dtype=dtype,
            chunks=(1, data.shape[1]),
            shards=data.shape,
            compressors=_compressors(config, np.dtype(dtype).itemsize),
            fill_value=0,
        )
        array[...] = data
    return {}


def _read_concurrently(arrays: list, selections: list) -> list[np.ndarray]:
    """Read several arrays in one trip through zarr's event loop (one hand-off, not three)."""
    import asyncio

    from zarr.core.sync import sync  # internal, in every zarr the package allows (3.0, 3.1)

    async def gather() -> list:
        # When one read fails (a damaged chunk), the others are cancelled and awaited before
        # the error is raised. A plain gather raises at once and leaves them pending in zarr's
        # event loop, and Python then prints "Task was destroyed but it is pending!" at exit.
        tasks = [
            asyncio.ensure_future(a._async_array.getitem(sel))
            for a, sel in zip(arrays, selections, strict=True)
        ]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    results = sync(gather())
    return [np.asarray(result) for result in results]


class ZarrShard:
    """An opened zarr shard; reads the tasks of one of its steps."""

    def __init__(self, path: Path) -> None:
        import zarr

        self.path = path
        try:
            self.group = zarr.open_group(str(path), mode="r", zarr_format=3)
            self.lengths = self.group.attrs["lengths"]
            self.arrays = {name: self.group[name] for name in ("x", "y", "meta")}
        except Exception as err:  # missing files, bad JSON, wrong layout
            raise ShardCorruptError(path, f"cannot open: {err}") from err

    def _rows(self, local_step: int) -> list[np.ndarray]:
        """The used parts of row ``local_step`` of x, y and meta, read concurrently."""
        names = ("x", "y", "meta")
        selections = [(local_step, slice(0, self.lengths[name][local_step])) for name in names]
        try:
            return _read_concurrently([self.arrays[name] for name in names], selections)
        except Exception as err:  # CRC mismatch, truncated file, decompression failure
            raise ShardCorruptError(self.path, f"step row {local_step}: {err}") from err

    def read_step(self, local_step: int, start: int, stop: int) -> list[Task]:
        x_flat, y_flat, meta_bytes = self._rows(local_step)
        try:
            metas = json.loads(meta_bytes.tobytes())
        except ValueError as err:
            raise ShardCorruptError(self.path, f"step row {local_step}: bad metadata") from err
        tasks = []
        x_at = y_at = 0
        for position, meta in enumerate(metas):
            n, d = meta["n_rows"], meta["n_features"]
            if start <= position < stop:
                x = x_flat[x_at : x_at + n * d].reshape(n, d)
                tasks.append(
                    Task(x=x, y=y_flat[y_at : y_at + n], n_labeled=meta["n_labeled"], meta=meta)
                )
            x_at += n * d
            y_at += n
        if x_at != x_flat.shape[0] or y_at != y_flat.shape[0]:
            raise ShardCorruptError(
                self.path, f"step row {local_step}: sizes disagree with metadata"
            )
        return tasks
