"""The one shard reader (docs/architecture.md §5), for zarr and WebDataset shards alike.

    reader = open_shards("shards/", split="train")
    reader.check_config(config)              # ShardMismatchError if made from another config
    reader.require_steps({1: range(0, 750)}) # ShardMismatchError naming the prior-gen command
    tasks = reader.read_step(1, 0, start=0, stop=24)

The layout on disk is in docs/architecture.md §6 (:func:`~prior_gen.shards.manifest.shard_relpath`).
"""

from __future__ import annotations

import shlex
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from prior_gen.config import GenerationConfig
from prior_gen.paper.seeding import TAIL, Stage
from prior_gen.shards.errors import ShardCorruptError, ShardMismatchError
from prior_gen.shards.manifest import (
    MANIFEST_NAME,
    config_differences,
    load_manifest,
    parse_stage_key,
    shard_key,
    stage_key,
    stage_order,
)
from prior_gen.shards.storage import digest_path, stored_bytes
from prior_gen.task import Task

__all__ = ["ShardReader", "format_ranges", "format_stages", "open_shards"]

_OPEN_SHARDS = 4  # shards kept open per reader (the trainer reads steps in order)


def format_ranges(values: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'."""
    parts: list[str] = []
    ordered = sorted(set(values))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def format_stages(stages: Iterable[Stage]) -> str:
    """[1, 2, 3, 9, "tail"] -> '1-3,9,tail' (a --stages spec)."""
    stages = list(stages)
    numbered = format_ranges(s for s in stages if s != TAIL)
    return ",".join(part for part in (numbered, TAIL if TAIL in stages else "") if part)


def _normalize_stage(stage: Stage | str) -> Stage:
    if stage == TAIL:
        return TAIL
    if isinstance(stage, str) and stage.isdigit():
        return int(stage)
    if isinstance(stage, bool) or not isinstance(stage, int):
        raise ValueError(f"a stage is an integer >= 1 or {TAIL!r}, got {stage!r}")
    return stage


class ShardReader:
    """Reads the tasks of any stored step of one split of a shard directory."""

    def __init__(self, directory: Path, manifest: dict[str, Any], split: str) -> None:
        self.directory = directory
        self.manifest = manifest
        self.split = split
        self.format: str = manifest["format"]
        self.global_batch: int = int(manifest["global_batch"])
        self.config_hash: str = manifest["config_hash"]
        self.steps_per_shard: int = int(manifest["shards"]["steps_per_shard"])
        self._stages: dict[str, dict[str, Any]] = manifest["splits"].get(split, {})
        self._open: OrderedDict[str, Any] = OrderedDict()

    # -- what is there ---------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        """Stages with at least one stored shard, phase 1 first, then the tail."""
        return [parse_stage_key(k) for k in sorted(self._stages, key=stage_order)]

    def _record(self, stage: Stage, step: int) -> dict[str, Any] | None:
        first = step - step % self.steps_per_shard
        record = self._stages.get(stage_key(stage), {}).get(shard_key(first))
        if record is None or not first <= step < first + record["n_steps"]:
            return None
        return record

    def has_step(self, stage: Stage | str, step: int) -> bool:
        return self._record(_normalize_stage(stage), step) is not None

    def available_steps(self, stage: Stage | str) -> list[int]:
        records = self._stages.get(stage_key(_normalize_stage(stage)), {}).values()
        return sorted(
            s for r in records for s in range(r["first_step"], r["first_step"] + r["n_steps"])
        )

    def missing_steps(self, stage: Stage | str, steps: Iterable[int]) -> list[int]:
        stage = _normalize_stage(stage)
        return [s for s in steps if self._record(stage, s) is None]

    def generate_command(self, stages: Stage | str, steps: Iterable[int] | None = None) -> str:
        """The prior-gen command that writes ``steps`` of ``stages`` (a stage, or a --stages
        spec such as "1-3,tail") into this directory."""
        parts = ["prior-gen", "--config", str(self.manifest.get("config_path") or "CONFIG"),
                 "--seed", str(self.manifest["seed"]), "--split", self.split,
                 "--format", self.format, "--stages", str(stages)]
        ordered = sorted(set(steps or ()))
        if ordered:
            parts += ["--steps", f"{ordered[0]}-{ordered[-1]}"]
        parts += ["--out", str(self.directory)]
        return shlex.join(parts)

    def require_steps(self, needed: Mapping[Stage | str, Iterable[int]]) -> None:
        """Raise ShardMismatchError naming the missing steps and the commands that make them.

        Stages missing the same steps share one command (``--stages 3-40,tail``)."""
        groups: dict[tuple[int, ...], list[Stage]] = {}
        for stage, steps in needed.items():
            missing = tuple(self.missing_steps(stage, steps))
            if missing:
                groups.setdefault(missing, []).append(_normalize_stage(stage))
        if not groups:
            return
        lines = []
        for missing, stages in groups.items():
            names = format_stages(stages)
            lines.append(f"  stages {names}: steps {format_ranges(missing)} missing; run: "
                         f"{self.generate_command(names, missing)}")
        raise ShardMismatchError(
            f"{self.directory} ({self.split} split) lacks steps that were asked for:\n"
            + "\n".join(lines)
        )

    def check_config(self, config: GenerationConfig | str) -> None:
        """Raise ShardMismatchError unless the shards were made from ``config`` (or its hash)."""
        expected = config if isinstance(config, str) else config.hash()
        if expected == self.config_hash:
            return
        detail = ""
        if isinstance(config, GenerationConfig):
            differences = config_differences(config.identity(), self.manifest["config"])
            detail = f"; differences, asked vs stored: {'; '.join(differences)}"
        raise ShardMismatchError(
            f"shards in {self.directory} were generated from config hash "
            f"{self.config_hash[:12]}, not {expected[:12]}{detail}. Generate shards for this "
            "config into another directory (prior-gen --config ... --out ...)"
        )

    # -- reading ---------------------------------------------------------------------------
    def _shard(self, record: dict[str, Any]) -> Any:
        relpath = record["path"]
        shard = self._open.get(relpath)
        if shard is not None:
            self._open.move_to_end(relpath)
            return shard
        path = self.directory / relpath
        if not path.exists():
            raise ShardCorruptError(path, "the file listed in the manifest is missing")
        if self.format == "zarr":
            from prior_gen.shards.zarr_format import ZarrShard

            shard = ZarrShard(path)
        else:
            from prior_gen.shards.tar_format import TarShard

            shard = TarShard(path, record["index"], self.global_batch)
        self._open[relpath] = shard
        if len(self._open) > _OPEN_SHARDS:
            self._open.popitem(last=False)
        return shard

    def read_step(
        self, stage: Stage | str, step: int, start: int = 0, stop: int | None = None
    ) -> list[Task]:
        """Tasks ``[start, stop)`` of ``step`` of ``stage``, in training order."""
        stage = _normalize_stage(stage)
        stop = self.global_batch if stop is None else stop
        if not 0 <= start <= stop <= self.global_batch:
            raise ValueError(
                f"task range [{start}, {stop}) is outside a step of {self.global_batch} tasks"
            )
        record = self._record(stage, step)
        if record is None:
            self.require_steps({stage: [step]})
        local = step - record["first_step"]
        return self._shard(record).read_step(local, start, stop)

    def verify(self) -> list[str]:
        """Re-hash every shard of this split; returns the paths that are missing or differ."""
        return self._failing(lambda path, record: digest_path(path)[0] == record["sha256"])

    def check_sizes(self) -> list[str]:
        """The paths of this split's shards that are missing or whose size differs from the
        manifest: a stat per file, so cheap enough to run on every ``inspect``; it catches
        truncated and missing shards but not flipped bytes (``verify`` does)."""
        return self._failing(lambda path, record: stored_bytes(path) == record["bytes"])

    def _failing(self, check: Callable[[Path, dict[str, Any]], bool]) -> list[str]:
        paths = [(self.directory / r["path"], r) for s in self._stages.values() for r in s.values()]
        return [str(path) for path, record in paths if not path.exists() or not check(path, record)]

    def close(self) -> None:
        self._open.clear()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_shards(
    path: str | Path, split: str = "train", expected_hash: str | None = None
) -> ShardReader:
    """Open the shard directory ``path`` for ``split`` (train | val).

    Raises ShardMismatchError if there is no manifest, the split is absent, or
    ``expected_hash`` is given and differs from the shards' config hash.
    """
    directory = Path(path)
    manifest = load_manifest(directory)
    if manifest is None:
        raise ShardMismatchError(
            f"{directory / MANIFEST_NAME} not found: generate shards first, e.g. "
            f"prior-gen --config configs/smoke.yaml --out {directory}"
        )
    if split not in manifest["splits"]:
        present = ", ".join(sorted(manifest["splits"])) or "none"
        raise ShardMismatchError(
            f"{directory} has no {split!r} split (present: {present}); run: prior-gen --config "
            f"{manifest.get('config_path') or 'CONFIG'} --split {split} --out {directory}"
        )
    reader = ShardReader(directory, manifest, split)
    if expected_hash is not None:
        reader.check_config(expected_hash)
    return reader
