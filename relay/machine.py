"""Which machine trained a segment, and whether a change of machine explains a replay that
differs.

Bit-for-bit reproduction on a GPU holds on the same GPU model with the same driver, CUDA and
PyTorch builds (docs/training.md §3); on a CPU, on the same CPU features and thread count.
The record carries these for every segment. When the replay of the previous segment's last
steps differs, :func:`difference_reason` names what changed between the machine that trained
them and this one: another kind (an H200 after an H100, another CPU), or other software
builds. A difference with nothing changed is unexplained, and the relay stops on it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

# what decides a training step's bits, beside the code and the config, and in what words a
# change of it is reported
KIND_KEYS = ("kind",)
BUILD_KEYS = ("driver", "torch", "cuda", "threads")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver_version() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def machine_identity(device: torch.device, threads: int | None) -> dict[str, Any]:
    """The machine a segment runs on: ``kind`` (the GPU's name, or ``cpu: <model>``), the
    driver, torch and CUDA builds, the torch threads (which decide a CPU run's bits), and the
    host's CPU and cores (for the reader; a GPU run's bits do not depend on them)."""
    cpu = cpu_model()
    if device.type == "cuda":
        kind = torch.cuda.get_device_name(device)
        driver = _driver_version()
    else:
        kind, driver = f"cpu: {cpu}", None
    return {"kind": kind, "driver": driver, "torch": str(torch.__version__),
            "cuda": torch.version.cuda if device.type == "cuda" else None,
            "threads": threads if device.type == "cpu" else None,
            "python": platform.python_version(), "host_cpu": cpu,
            "host_cores": os.cpu_count()}


def _changes(recorded: dict[str, Any], current: dict[str, Any], keys: tuple) -> list[str]:
    return [f"{key} {recorded.get(key)!r} -> {current.get(key)!r}" for key in keys
            if recorded.get(key) != current.get(key)]


def difference_reason(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """Why a replay on ``current`` may differ from the steps ``recorded`` trained, or None
    when nothing that decides the bits changed."""
    kind = _changes(recorded, current, KIND_KEYS)
    if kind:
        return f"machine kind changed ({kind[0]})"
    builds = _changes(recorded, current, BUILD_KEYS)
    if builds:
        return "software builds changed (" + ", ".join(builds) + ")"
    return None
