"""Digests that say, bit for bit, whether two training states are the same, and which code
trained them.

A checkpoint file's own sha256 cannot compare two runs: the file also holds what varies
without changing the run (the shard manifest's hash, which grows as shards are written, the
device's name, RNG states no step draws from). :func:`state_digest` hashes only what a step
reads and writes: the model's and the EMA's tensors, the optimizer's state and settings, the
skip counters and the step, each tensor with its name, dtype and shape. One digest per part,
so that a DIFFERENT can say which parts differ, and one over them all.

:func:`code_digest` hashes the sources of what decides the bits of training (the trainer, the
prior that makes its data, the network and the common helpers), so that the record says
whether the code changed between two segments.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

STATE_PARTS = ("model", "ema", "optimizer", "counters", "step")
# the sources whose change may change a training step's bits
TRAINING_CODE = ("trainer", "prior_gen", "puicl_model/net", "puicl_common")
CODE_SUFFIXES = (".py", ".c")


def _leaves(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(path-like name, leaf) of every tensor and plain value of a nested payload, in a fixed
    order: mapping keys sorted by their text."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _leaves(value[key], f"{name}/{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{name}/{index}")
    else:
        yield name, value


def _update(digest: Any, name: str, leaf: Any) -> None:
    digest.update(name.encode() + b"\0")
    if torch.is_tensor(leaf):
        tensor = leaf.detach().cpu().contiguous()
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode() + b"\0")
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        digest.update(json.dumps(leaf, sort_keys=True).encode() + b"\0")


def state_digest(payload: dict[str, Any]) -> dict[str, str]:
    """sha256 of each part of a checkpoint's training state, and of them all (``state``)."""
    parts = {}
    for part in STATE_PARTS:
        if part not in payload:
            raise KeyError(f"the checkpoint holds no '{part}'")
        digest = hashlib.sha256()
        for name, leaf in _leaves(payload[part], part):
            _update(digest, name, leaf)
        parts[part] = digest.hexdigest()
    whole = hashlib.sha256("".join(f"{k}={v};" for k, v in parts.items()).encode())
    return {"state": whole.hexdigest(), **parts}


def differing_parts(recorded: dict[str, str], replayed: dict[str, str]) -> list[str]:
    """The parts of two digests that differ (all of them where one lacks a part)."""
    return [part for part in STATE_PARTS if recorded.get(part) != replayed.get(part)]


def code_digest(root: Path) -> str:
    """sha256 over the training code's source files (their paths and bytes) under ``root``."""
    digest = hashlib.sha256()
    for folder in TRAINING_CODE:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in CODE_SUFFIXES and path.is_file() \
                    and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()
