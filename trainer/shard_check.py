"""Before training: do the shards fit this run, and hold every step this segment will read?

The checks, in order, each failing with a ``ShardPlanError`` that says what differs and the
exact ``prior-gen`` command that would fix it:

1. the directory exists and has a manifest with the split;
2. its tasks per step (global batch) and number of stages are the config's;
3. its prior config hash is the config's (same seed, prior and curriculum => same tasks);
4. every (stage, step) that the sampler maps the segment's global steps to is stored --
   only the segment's, so a long run can be generated and trained piece by piece.

The validation split gets the same treatment for the stages and steps listed in the
``validation`` section.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections import defaultdict
from pathlib import Path

from prior_gen.shards import ShardReader, format_ranges, format_stages, open_shards
from prior_gen.shards.errors import ShardMismatchError
from prior_gen.shards.manifest import MANIFEST_NAME, load_manifest
from trainer.config import RunConfig, ValidationConfig
from trainer.sampler import StepSampler


class ShardPlanError(ValueError):
    """The shards cannot feed this run; the message says what to generate."""


def generate_commands(
    needed: dict, config_path: Path, out: Path, split: str, fmt: str | None = None
) -> list[str]:
    """``prior-gen`` commands writing ``needed`` ({stage: steps}); stages that need the same
    step range share one command."""
    by_range: dict[tuple[int, int], list] = defaultdict(list)
    for stage, steps in needed.items():
        ordered = sorted(steps)
        by_range[(ordered[0], ordered[-1])].append(stage)
    commands = []
    for (first, last), stages in by_range.items():
        parts = ["prior-gen", "--config", str(config_path)]
        if split != "train":
            parts += ["--split", split]
        if fmt is not None:
            parts += ["--format", fmt]
        parts += ["--stages", format_stages(stages), "--steps", f"{first}-{last}"]
        parts += ["--out", str(out)]
        commands.append(shlex.join(parts))
    return commands


def _how_to_generate(needed: dict, config_path: Path, out: Path, split: str) -> str:
    commands = generate_commands(needed, config_path, out, split)
    if len(commands) == 1:  # the whole message stays one line
        return f"generate them with: {commands[0]}"
    return "generate them with:\n  " + "\n  ".join(commands)


def _open(
    directory: Path, split: str, config: RunConfig, config_path: Path, needed: dict
) -> ShardReader:
    what = f"the {split} split needed by this run"
    if not directory.is_dir():
        raise ShardPlanError(
            f"shard directory {directory} does not exist; "
            + _how_to_generate(needed, config_path, directory, split)
        )
    if not (directory / MANIFEST_NAME).exists():
        raise ShardPlanError(
            f"{directory} has no {MANIFEST_NAME}, so it holds no shards; "
            + _how_to_generate(needed, config_path, directory, split)
        )
    splits = (load_manifest(directory) or {}).get("splits", {})
    if split not in splits:
        # open_shards would suggest generating the whole split (every stage and step); for
        # this run only the steps it reads are needed, so name just that command
        present = ", ".join(sorted(splits)) or "none"
        raise ShardPlanError(
            f"{directory} has no {split!r} split (present: {present}); "
            + _how_to_generate(needed, config_path, directory, split)
        )
    try:
        reader = open_shards(directory, split)
    except ShardMismatchError as err:
        raise ShardPlanError(
            f"{directory} lacks {what} ({err}); "
            + _how_to_generate(needed, config_path, directory, split)
        ) from None
    _check_identity(reader, config, config_path, directory)
    return reader


def _check_identity(
    reader: ShardReader, config: RunConfig, config_path: Path, directory: Path
) -> None:
    stored = reader.manifest["config"]["curriculum"]
    fresh = f"prior-gen --config {shlex.quote(str(config_path))} --out NEW_DIR"
    if reader.global_batch != config.curriculum.global_batch:
        raise ShardPlanError(
            f"shards in {directory} hold {reader.global_batch} tasks per step, but "
            f"{config_path} trains on curriculum.global_batch={config.curriculum.global_batch}; "
            f"generate shards for this config into a new directory: {fresh}"
        )
    if stored["stages"] != config.curriculum.stages:
        raise ShardPlanError(
            f"shards in {directory} were generated for {stored['stages']} curriculum stages, "
            f"but {config_path} has curriculum.stages={config.curriculum.stages}; "
            f"generate shards for this config into a new directory: {fresh}"
        )
    try:
        reader.check_config(config.generation())
    except ShardMismatchError as err:
        raise ShardPlanError(
            f"{err}\nThe config is {config_path}; e.g.: {fresh}"
        ) from None


def needed_steps(sampler: StepSampler, start: int, stop: int) -> dict:
    """{stage: sorted steps} that global steps ``[start, stop)`` read."""
    needed: dict = defaultdict(set)
    for _, address in sampler.addresses(start, stop):
        needed[address.stage].add(address.step_in_stage)
    return {stage: sorted(steps) for stage, steps in needed.items()}


def _require(reader: ShardReader, needed: dict, config_path: Path, directory: Path,
             split: str, segment: str) -> None:
    missing = {}
    for stage, steps in needed.items():
        absent = reader.missing_steps(stage, steps)
        if absent:
            missing[stage] = absent
    if missing:
        listing = "; ".join(
            f"stage {stage}: steps {format_ranges(steps)}" for stage, steps in missing.items()
        )
        raise ShardPlanError(
            f"{directory} ({split} split) lacks steps that {segment} reads ({listing}); "
            + _how_to_generate(missing, config_path, directory, split)
        )


def check_train_shards(
    directory: Path, config: RunConfig, config_path: Path, sampler: StepSampler,
    start: int, stop: int,
) -> ShardReader:
    """The train-split reader, after checking it can feed global steps ``[start, stop)``."""
    needed = needed_steps(sampler, start, stop)
    reader = _open(directory, "train", config, config_path, needed)
    _require(reader, needed, config_path, directory, "train",
             f"training steps {start}..{stop - 1}")
    return reader


def check_val_shards(
    directory: Path, config: RunConfig, config_path: Path
) -> ShardReader:
    """The val-split reader, after checking it holds the configured validation steps."""
    validation: ValidationConfig = config.validation
    needed = {stage: list(range(validation.steps_per_stage)) for stage in validation.stages}
    reader = _open(directory, "val", config, config_path, needed)
    _require(reader, needed, config_path, directory, "val", "validation")
    return reader


def manifest_sha256(reader: ShardReader) -> str:
    """sha256 of the manifest as read (recorded in checkpoints: which shard set was used)."""
    canonical = json.dumps(reader.manifest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
