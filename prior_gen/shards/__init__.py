"""Shard I/O: the tasks of a run on disk, written by ``prior-gen`` and read by the trainer.

``reader`` (:func:`open_shards`, :class:`ShardReader`: the one reader of stored tasks);
``zarr_format`` and ``tar_format`` (the two formats of a shard file); ``manifest``
(``manifest.json``: the run's config and one record per shard); ``storage`` (atomic
publication, digests, the writer's lock); ``inspection`` (``prior-gen inspect``); ``errors``;
``faults`` (a planned crash, for the tests of resuming).
"""

from __future__ import annotations

from prior_gen.shards.errors import ShardCorruptError, ShardError, ShardMismatchError
from prior_gen.shards.reader import ShardReader, format_ranges, format_stages, open_shards

__all__ = [
    "ShardCorruptError",
    "ShardError",
    "ShardMismatchError",
    "ShardReader",
    "format_ranges",
    "format_stages",
    "open_shards",
]
