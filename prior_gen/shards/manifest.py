"""``manifest.json``: what a shard directory holds and how it was made.

One manifest per output directory covers both splits::

    {"kind": "puicl-prior-shards", "format_version": 1, "package_version": "0.1.0",
     "format": "zarr", "shards": {<ShardConfig>}, "config_hash": "...", "seed": 0,
     "config": {"seed": .., "prior": {..}, "curriculum": {..}}, "config_path": "...",
     "global_batch": 48, "commands": ["prior-gen ...", ...],
     "splits": {"train": {"1": {"000000": <shard record>, ...}, "tail": {...}}, "val": {...}},
     "summary": {"train": {"1": <stage statistics>, ...}, ...}}

A shard record: ``path`` (relative), ``stage``, ``first_step``, ``n_steps``, ``n_tasks``,
``sha256`` and ``bytes`` of the stored shard, ``stats`` (sums over its tasks, see
:func:`task_stats`) and, for tar shards, ``index`` = [offset, size] of the tar's index member.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prior_gen.config import GenerationConfig
from prior_gen.paper.seeding import SPLIT_CODES, TAIL, Stage
from prior_gen.shards.errors import ShardCorruptError, ShardMismatchError
from prior_gen.task import Task
from puicl_common import __version__
from puicl_common.configio import to_dict
from puicl_common.run_files import read_text_inside, write_json_inside

__all__ = [
    "FORMAT_VERSION",
    "KIND",
    "MANIFEST_NAME",
    "SUFFIXES",
    "check_compatible",
    "config_differences",
    "load_manifest",
    "merge_stats",
    "new_manifest",
    "shard_key",
    "shard_relpath",
    "stage_key",
    "stage_order",
    "summarize",
    "task_stats",
    "write_manifest",
]

KIND = "puicl-prior-shards"
SUFFIXES = {"zarr": ".zarr", "webdataset": ".tar"}
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


def shard_relpath(split: str, stage: Stage, first_step: int, fmt: str) -> str:
    """Where a shard lies under the output directory; the only paths a manifest may list."""
    stage_dir = TAIL if stage == TAIL else f"stage-{int(stage):03d}"
    return f"{split}/{stage_dir}/shard-{first_step:06d}{SUFFIXES[fmt]}"


def stage_key(stage: Stage) -> str:
    return TAIL if stage == TAIL else str(int(stage))


def shard_key(first_step: int) -> str:
    return f"{first_step:06d}"


def parse_stage_key(key: str) -> Stage:
    return TAIL if key == TAIL else int(key)


def stage_order(key: str) -> tuple[bool, int]:
    """Sorts stage keys as the curriculum runs them: 1..K, then the tail."""
    return key == TAIL, 0 if key == TAIL else int(key)


def new_manifest(config: GenerationConfig, config_path: str) -> dict[str, Any]:
    return {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "format": config.shards.format,
        "shards": to_dict(config.shards),
        "config_hash": config.hash(),
        "seed": config.seed,
        "config": config.identity(),
        "config_path": config_path,
        "global_batch": config.curriculum.global_batch,
        "commands": [],
        "splits": {},
        "summary": {},
    }


def load_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of ``directory``, or None if it has none yet."""
    path = directory / MANIFEST_NAME
    hint = "delete the directory (or move it aside) and generate its shards again"
    try:
        # a FIFO or a device planted there is refused, not waited on (puicl_common.run_files)
        text = read_text_inside(path)
    except FileNotFoundError:
        return None
    except ValueError:  # bytes that are not UTF-8: no manifest prior-gen wrote
        raise ShardCorruptError(path, "not a JSON text file", hint=hint) from None
    if not text.strip():
        raise ShardCorruptError(path, "the file is empty", hint=hint)
    try:
        manifest = json.loads(text)
    except ValueError as err:
        raise ShardCorruptError(path, f"not valid JSON: {err}", hint=hint) from err
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise ShardMismatchError(f"{path} is not a puicl shard manifest (kind {KIND!r} expected)")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ShardMismatchError(
            f"{path} has shard format version {version}; this prior_gen reads version "
            f"{FORMAT_VERSION}: regenerate the shards with this version of prior-gen"
        )
    _check_records(manifest, path)
    return manifest


def _check_records(manifest: dict[str, Any], path: Path) -> None:
    """Refuse a manifest whose shard records point anywhere but their own shard's place.

    Readers open ``directory / record["path"]``: a crafted ``../..`` or absolute path would
    read (and a rerun would hash) files outside the shard directory. Each record's path must
    be exactly the one :func:`shard_relpath` gives for its split, stage and first step.
    """
    def refuse(detail: str) -> ShardCorruptError:
        return ShardCorruptError(
            path,
            detail,
            hint="nothing was read from it; delete the directory (or move it aside) and "
            "generate its shards again",
        )

    fmt = manifest.get("format")
    splits = manifest.get("splits")
    if fmt not in SUFFIXES or not isinstance(splits, dict):
        raise refuse(f"format {fmt!r} or its splits are not those of a shard manifest")
    for split, stages in splits.items():
        if split not in SPLIT_CODES or not isinstance(stages, dict):
            raise refuse(f"unknown split {split!r}")
        for key, shards in stages.items():
            if not (key == TAIL or (key.isdigit() and int(key) >= 1 and key == str(int(key)))):
                raise refuse(f"unknown stage {key!r} in split {split!r}")
            if not isinstance(shards, dict):
                raise refuse(f"stage {key!r} of split {split!r} is not a mapping of shards")
            for first, record in shards.items():
                first_step = record.get("first_step") if isinstance(record, dict) else None
                if not isinstance(first_step, int) or first_step < 0 or first != shard_key(
                    first_step
                ):
                    raise refuse(f"shard {first!r} of {split} stage {key} has a bad first_step")
                expected = shard_relpath(split, parse_stage_key(key), first_step, fmt)
                if record.get("path") != expected:
                    raise refuse(
                        f"lists {record.get('path')!r} for shard {first} of {split} stage "
                        f"{key}, where only {expected!r} may stand"
                    )


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    manifest["summary"] = summarize(manifest)
    manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_json_inside(directory / MANIFEST_NAME, manifest, directory)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def config_differences(ours: dict[str, Any], theirs: dict[str, Any], limit: int = 5) -> list[str]:
    """Dotted keys whose values differ, as 'key: A (ours) vs B (theirs)' lines."""
    a, b = _flatten(ours), _flatten(theirs)
    lines = [
        f"{key}: {a.get(key, '<absent>')!r} vs {b.get(key, '<absent>')!r}"
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
    return lines


def check_compatible(manifest: dict[str, Any], config: GenerationConfig, directory: Path) -> None:
    """Refuse to mix shards of another config, format or shard layout in one directory."""
    if manifest["config_hash"] != config.hash():
        differences = config_differences(config.identity(), manifest["config"])
        raise ShardMismatchError(
            f"{directory} holds shards of another configuration (config hash "
            f"{manifest['config_hash'][:12]} there, {config.hash()[:12]} here; differences, "
            f"this run vs the directory: {'; '.join(differences) or 'none visible'}). "
            "Use another --out, or delete that directory"
        )
    ours = to_dict(config.shards)
    if manifest["shards"] != ours:
        differences = config_differences(ours, manifest["shards"])
        raise ShardMismatchError(
            f"{directory} holds shards written with other shard settings "
            f"({'; '.join(differences)}); pass the same --format / shards section, "
            "or use another --out"
        )


def task_stats(tasks: list[Task]) -> dict[str, float]:
    """Sums (and extremes) over tasks, merged across shards by :func:`merge_stats`."""
    metas = [task.meta for task in tasks]

    def total(key: str, start: float = 0) -> float:
        return sum((meta[key] for meta in metas), start)

    realized_pi = [meta["realized_pi"] for meta in metas]
    return {
        "tasks": len(tasks),
        "rows": total("n_rows"),
        "features": total("n_features"),
        "labeled": total("n_labeled"),
        "unlabeled": total("n_unlabeled"),
        "generated_rows": total("n_generated"),
        "pi": total("pi", 0.0),
        "realized_pi": total("realized_pi", 0.0),
        "realized_pi_min": min([1.0, *realized_pi]),
        "realized_pi_max": max([0.0, *realized_pi]),
        "eta": total("eta", 0.0),
        "realized_eta": total("realized_eta", 0.0),
        "causal": sum(int(meta["causal"]) for meta in metas),
        "redraws": sum(meta["attempts"] - 1 for meta in metas),
        "raw_bytes": sum(task.x.nbytes + task.y.nbytes for task in tasks),
    }


def merge_stats(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    for key, value in part.items():
        if key.endswith("_min"):
            total[key] = min(total.get(key, value), value)
        elif key.endswith("_max"):
            total[key] = max(total.get(key, value), value)
        else:
            total[key] = total.get(key, 0) + value
    return total


def summarize(manifest: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per split and stage: steps, shards, bytes and the merged task statistics."""
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for split, stages in manifest["splits"].items():
        for stage, shards in stages.items():
            total: dict[str, float] = {"shards": 0, "steps": 0, "bytes": 0}
            for record in shards.values():
                total["shards"] += 1
                total["steps"] += record["n_steps"]
                total["bytes"] += record["bytes"]
                merge_stats(total, record["stats"])
            summary.setdefault(split, {})[stage] = total
    return summary
