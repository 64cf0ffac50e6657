"""Compare finished training runs: are their weights the same, and how fast did they train?

``compare REF OTHER...`` reads the newest checkpoint of each run directory through the
trainer's own verified loader (``trainer.export.load_run_checkpoint``: checksums, no arbitrary
unpickling) and compares the model, EMA and optimizer tensors one by one. One line per other
run: ``IDENTICAL`` or ``DIFFERENT``, how many tensors differ, the largest absolute difference,
and the first logged step whose loss differs (``metrics.jsonl``). Exit status 1 when any run
differs, so a script can stop on it.

``speed RUN...`` prints, per run, the tasks per second of its logged windows after the first
(which holds the start-up: CUDA context, kernel choice, the loader's first reads), their mean,
the share of the time spent waiting for data, and the run's start line (device, attention
backend).

    python -m speed.training_runs compare runs/a runs/b runs/resumed
    python -m speed.training_runs speed runs/a runs/b
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from trainer.export import load_run_checkpoint
from trainer.metrics_log import read_metrics

STATE_PARTS = ("model", "ema", "optimizer")


def state_tensors(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's model, EMA and optimizer, by a path-like name."""

    def walk(value: Any, name: str) -> Iterator[tuple[str, torch.Tensor]]:
        if torch.is_tensor(value):
            yield name, value
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                yield from walk(value[key], f"{name}/{key}")
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                yield from walk(item, f"{name}/{index}")

    return dict(walk({part: payload[part] for part in STATE_PARTS}, ""))


def logged_losses(run: Path) -> dict[int, float]:
    return {int(r["step"]): r["loss"] for r in read_metrics(run / "metrics.jsonl")
            if r.get("kind") == "train"}


def compare(reference: Path, other: Path) -> tuple[bool, str]:
    """Whether ``other``'s newest checkpoint equals ``reference``'s, and the line to print."""
    ref_path, ref_payload = load_run_checkpoint(reference)
    path, payload = load_run_checkpoint(other)
    expected, got = state_tensors(ref_payload), state_tensors(payload)
    names = sorted(set(expected) | set(got))
    differing, largest = [], 0.0
    for name in names:
        a, b = expected.get(name), got.get(name)
        if a is None or b is None or a.shape != b.shape or a.dtype != b.dtype:
            differing.append(name)
            largest = float("inf")
        elif not torch.equal(a, b):
            differing.append(name)
            if a.is_floating_point():
                largest = max(largest, float((a.double() - b.double()).abs().max()))
    ref_losses, losses = logged_losses(reference), logged_losses(other)
    first = next((step for step in sorted(set(ref_losses) & set(losses))
                  if ref_losses[step] != losses[step]), None)
    same = not differing and ref_path.name == path.name
    verdict = "IDENTICAL" if same else "DIFFERENT"
    line = (f"{other} vs {reference}: {verdict} ({path.name} vs {ref_path.name}; "
            f"{len(differing)} of {len(names)} tensors differ, max abs diff {largest:.3g}; "
            f"first logged loss that differs: "
            f"{'none' if first is None else f'step {first}'})")
    return same, line


def speed_line(run: Path) -> str:
    """Tasks/s of a run's logged windows after the first, and its data-wait share."""
    records = read_metrics(run / "metrics.jsonl")
    windows = [r for r in records if r.get("kind") == "train"]
    start = next((r for r in records if r.get("event") == "start"), {})
    measured = windows[1:] if len(windows) > 1 else windows
    if not measured:
        return f"{run}: no logged windows"
    rates = [float(r["tasks_per_s"]) for r in measured]
    wait = statistics.fmean(float(r.get("data_wait_share", 0.0)) for r in measured)
    return (f"{run}: {statistics.fmean(rates):.1f} tasks/s (windows "
            f"{', '.join(f'{x:.0f}' for x in rates)}), data wait {100 * wait:.1f} %, "
            f"device {start.get('device', '?')}, attention {start.get('attention', '?')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.training_runs",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compare_parser = commands.add_parser("compare", help="compare checkpoints tensor by tensor")
    compare_parser.add_argument("reference", type=Path)
    compare_parser.add_argument("others", type=Path, nargs="+")
    speed_parser = commands.add_parser("speed", help="tasks/s and data wait of runs")
    speed_parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "speed":
        for run in args.runs:
            print(speed_line(run), flush=True)
        return 0
    all_same = True
    for other in args.others:
        same, line = compare(args.reference, other)
        all_same &= same
        print(line, flush=True)
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
