"""A run folder: what is committed between two segments, and the checks it passes before a
segment trusts it.

```
FOLDER/
  relay.yaml      what the run is: its source config, the sha256 of config.yaml, the number
                  of steps each segment leaves for the next one to replay
  config.yaml     the run's config, resolved and frozen at `relay init` (every segment trains
                  this file; a changed byte is refused)
  relay.jsonl     the record: one line per segment (docs/training.md, "The paper's run, in
                  segments")
  scores.jsonl    the committed states' scores, one line per step scored
  metrics.jsonl   the trainer's metrics of the whole run, up to the newest segment's end
  state/          the training state of the step the newest segment committed, packed
                  (relay.state_pack): state.json and part-00.xz, part-01.xz, ...
```

A segment writes a new folder of this layout to its OUT (only the files that change:
relay.jsonl, scores.jsonl, metrics.jsonl, state/); :func:`take` checks that folder against the
committed one and puts it in place: the record must be the committed record plus one line,
the scores the committed scores plus at most one line, and the state the new line names must
unpack to the bytes it records.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from puicl_common.atomic import atomic_write_bytes, atomic_write_text
from puicl_common.configio import ConfigError, load_yaml
from relay import state_pack
from trainer.config import load_run_config, run_config_to_dict

SETTINGS = "relay.yaml"
CONFIG = "config.yaml"
RECORD = "relay.jsonl"
SCORES = "scores.jsonl"
METRICS = "metrics.jsonl"
STATE = "state"
FORMAT = 1
DEFAULT_REPLAY_STEPS = 100


class FolderError(ValueError):
    """A run folder (or what a segment gave back) that a segment must not trust."""


def _set_dotted(mapping: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        child = mapping.get(key)
        if not isinstance(child, dict):
            raise FolderError(f"--set {dotted}: {key} is not a section of the config")
        mapping = child
    if last not in mapping:
        raise FolderError(f"--set {dotted}: the config has no key {last!r} there")
    mapping[last] = value


def init_folder(config_path: Path, folder: Path, replay_steps: int = DEFAULT_REPLAY_STEPS,
                overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start a run folder for ``config_path`` (with dotted-key ``overrides``); returns its
    settings. A folder that exists is refused: a run is initialised once."""
    if folder.exists():
        raise FolderError(f"{folder} exists: a run folder is initialised once (delete it to "
                          "start the run again, before its first segment)")
    if replay_steps < 1:
        raise FolderError(f"--replay-steps must be at least 1, got {replay_steps}")
    try:
        mapping = load_yaml(config_path)
        for dotted, value in (overrides or {}).items():
            _set_dotted(mapping, dotted, value)
        text = yaml.safe_dump(mapping, sort_keys=False)
        staging = folder.with_name(folder.name + ".init")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        atomic_write_text(staging / CONFIG, text)
        config = load_run_config(staging / CONFIG)  # validated as the trainer reads it
    except ConfigError as err:
        raise FolderError(f"{config_path}: {err}") from None
    # the resolved form, as run directories store it: every default written out
    atomic_write_text(staging / CONFIG,
                      yaml.safe_dump(run_config_to_dict(config), sort_keys=False))
    settings = {"format": FORMAT, "source_config": str(config_path),
                "overrides": overrides or {},
                "config_sha256": hashlib.sha256((staging / CONFIG).read_bytes()).hexdigest(),
                "training_hash": config.training_hash(), "replay_steps": replay_steps,
                "total_steps": config.curriculum.total_steps}
    atomic_write_text(staging / SETTINGS, yaml.safe_dump(settings, sort_keys=False))
    atomic_write_text(staging / RECORD, "")
    staging.rename(folder)
    return settings


def read_settings(folder: Path) -> dict[str, Any]:
    """``relay.yaml``, after checking that ``config.yaml`` is the file it names."""
    path = folder / SETTINGS
    try:
        settings = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FolderError(f"{folder} is not a run folder: it has no {SETTINGS} (start one "
                          "with `python -m relay init CONFIG FOLDER`)") from None
    except (OSError, yaml.YAMLError) as err:
        raise FolderError(f"{path} cannot be read ({err})") from None
    keys = ("format", "config_sha256", "training_hash", "replay_steps", "total_steps")
    if not isinstance(settings, dict) or any(key not in settings for key in keys) \
            or settings["format"] != FORMAT:
        raise FolderError(f"{path} is not a relay settings file of format {FORMAT} "
                          f"(it needs {', '.join(keys)})")
    config = folder / CONFIG
    try:
        digest = hashlib.sha256(config.read_bytes()).hexdigest()
    except OSError as err:
        raise FolderError(f"{config} cannot be read ({err.strerror or err})") from None
    if digest != settings["config_sha256"]:
        raise FolderError(f"{config} is not the config this run was started with (its sha256 "
                          f"differs from {path}'s): a run's config is frozen at `relay init`")
    return settings


def read_scores(path: Path) -> list[dict[str, Any]]:
    """The scores' lines (none before the first state is scored), one per step, in order."""
    if not path.exists():
        return []
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = json.loads(text)
        except ValueError:
            raise FolderError(f"{path}:{number} is not a JSON line") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int) \
                or (lines and entry["step"] <= lines[-1]["step"]):
            raise FolderError(f"{path}:{number} is not the scores of a later step")
        lines.append(entry)
    return lines


def read_record(path: Path) -> list[dict[str, Any]]:
    """The record's lines, each a JSON object with its segment number in order."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FolderError(f"{path} does not exist: not a run folder's record") from None
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            entry = json.loads(line)
        except ValueError:
            raise FolderError(f"{path}:{number} is not a JSON line") from None
        if not isinstance(entry, dict) or entry.get("segment") != number:
            raise FolderError(f"{path}:{number} is not the record of segment {number}")
        lines.append(entry)
    return lines


def newest_state_line(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest line that committed a state (a segment stopped on a replay that differs
    commits none), or None before the first segment."""
    return next((line for line in reversed(lines) if line.get("committed")), None)


def check_state(folder: Path, line: dict[str, Any] | None) -> tuple[dict, bytes] | None:
    """The committed state's manifest and checkpoint bytes, checked against the record line
    that committed it; None for a run before its first segment."""
    state_dir = folder / STATE
    if line is None:
        if state_dir.exists():
            raise FolderError(f"{state_dir} exists, but {folder / RECORD} records no segment "
                              "that committed a state")
        return None
    try:
        manifest, data = state_pack.unpack(state_dir)
    except state_pack.StatePackError as err:
        raise FolderError(str(err)) from None
    committed = line["committed"]
    if manifest["step"] != committed["step"] or \
            manifest["checkpoint"]["sha256"] != committed["checkpoint_sha256"]:
        raise FolderError(
            f"{state_dir} holds the checkpoint of step {manifest['step']} "
            f"(sha256 {manifest['checkpoint']['sha256'][:12]}), but segment {line['segment']} "
            f"of {folder / RECORD} committed step {committed['step']} "
            f"(sha256 {committed['checkpoint_sha256'][:12]})")
    return manifest, data


def take(returned: Path, folder: Path) -> dict[str, Any]:
    """Check the folder a segment gave back and put its files into ``folder``; returns the new
    record line."""
    read_settings(folder)
    old = read_record(folder / RECORD)
    new = read_record(returned / RECORD)
    if new[:-1] != old or len(new) != len(old) + 1:
        raise FolderError(f"{returned / RECORD} is not {folder / RECORD} plus one line: it "
                          "belongs to another run or another state of this one")
    line = new[-1]
    old_scores = read_scores(folder / SCORES)
    new_scores = read_scores(returned / SCORES) if (returned / SCORES).exists() else old_scores
    if new_scores[:len(old_scores)] != old_scores or len(new_scores) > len(old_scores) + 1:
        raise FolderError(f"{returned / SCORES} is not {folder / SCORES} plus at most one line")
    replace_state = bool(line.get("committed"))
    if replace_state:
        check_state(returned, line)
        _check_json_lines(returned / METRICS)
    _replace_files(returned, folder, replace_state)
    return line


def _check_json_lines(path: Path) -> None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError) as err:
        raise FolderError(f"{path} cannot be read ({err})") from None
    for number, text in enumerate(lines, start=1):
        try:
            json.loads(text)
        except ValueError:
            raise FolderError(f"{path}:{number} is not a JSON line") from None


def _replace_files(returned: Path, folder: Path, replace_state: bool) -> None:
    """Copy the record (and, with ``replace_state``, the metrics and the state) into a staging
    copy of ``folder``, then swap the two."""
    staging, previous = folder.with_name(folder.name + ".take"), folder.with_name(
        folder.name + ".previous")
    for leftover in (staging, previous):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.copytree(folder, staging)
    atomic_write_bytes(staging / RECORD, (returned / RECORD).read_bytes())
    if (returned / SCORES).exists():
        atomic_write_bytes(staging / SCORES, (returned / SCORES).read_bytes())
    if replace_state:
        atomic_write_bytes(staging / METRICS, (returned / METRICS).read_bytes())
        shutil.rmtree(staging / STATE, ignore_errors=True)
        (staging / STATE).mkdir()
        manifest = state_pack.read_manifest(returned / STATE)
        for name in [part["file"] for part in manifest["parts"]] + [state_pack.MANIFEST]:
            shutil.copy2(returned / STATE / name, staging / STATE / name)
    folder.rename(previous)
    staging.rename(folder)
    shutil.rmtree(previous)
