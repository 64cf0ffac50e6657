"""Errors of the shard reader and writer; every message says what is wrong and what to do."""

from __future__ import annotations

__all__ = ["ShardCorruptError", "ShardError", "ShardMismatchError"]


class ShardError(Exception):
    """Base class of shard problems."""


class ShardMismatchError(ShardError, ValueError):
    """The shards on disk are not what was asked for (config, split, steps, format)."""


class ShardCorruptError(ShardError, OSError):
    """A shard file is damaged or incomplete; ``path`` names it."""

    def __init__(self, path: object, detail: str, hint: str | None = None) -> None:
        self.path = str(path)
        hint = hint or "rerun the prior-gen command that wrote it to regenerate damaged shards"
        super().__init__(f"{self.path} is corrupt ({detail}); {hint}")
