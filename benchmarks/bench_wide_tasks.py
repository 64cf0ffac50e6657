"""Seconds and peak memory of one training step of v1's model, by the tasks' feature count.

What ``prior.dataset.wide`` costs the trainer: one step (the micro-batches of
``configs/puicl_v1.yaml``'s training section, forward + backward, gradient clipping, AdamW, the
EMA update) of v1's model (``configs/puicl_v1.yaml``: 64 wide, 4 layers) on ``--tasks`` tasks
(default 8: one rank's share of v1's 16-task steps, as its 2-process run trains) whose feature
count is each of ``--features`` in turn (default 20, 50, 100).

The tasks are step ``--step`` of the tail of v1's prior with ``prior.dataset.wide`` set to
probability 1 and ``n_features: [d, d]``: the wide draw reads none of the task's main stream, so
every feature count gets the same row counts, π and η, and only the width differs (causal SCMs
widened as ``prior_gen.wide`` does). ``model.max_features`` is left at v1's 20: it bounds what
the classifier passes to the model, not what the model can train on.

Each feature count runs in a fresh child process: one untimed step first, over which the peak
memory rise is taken (the resident set's peak, ``ru_maxrss``, over the resident memory before
it; on CUDA ``torch.cuda.max_memory_allocated``), then ``--repeats`` timed steps of which the
fastest is reported. Run it on an idle machine; docs/performance.md records such figures.

    .venv/bin/python benchmarks/bench_wide_tasks.py
    .venv/bin/python benchmarks/bench_wide_tasks.py --features 20,100 --tasks 16 --device cuda
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "puicl_v1.yaml"


def save_tasks(n_features: int, tasks: int, step: int, out: Path) -> None:
    """The first ``tasks`` tasks of tail step ``step`` of v1's prior, all of ``n_features``
    features (``prior.dataset.wide`` at probability 1), to ``out`` (npz)."""
    import numpy as np

    from prior_gen.generate import generate_step
    from prior_gen.mechanisms_config import WideConfig
    from trainer.config import load_run_config

    generation = load_run_config(CONFIG).generation()
    dataset = dataclasses.replace(
        generation.prior.dataset, wide=WideConfig(1.0, (n_features, n_features))
    )
    config = dataclasses.replace(
        generation, prior=dataclasses.replace(generation.prior, dataset=dataset)
    )
    arrays = {}
    for i, task in enumerate(generate_step(config, "train", "tail", step)[:tasks]):
        arrays[f"{i}/x"], arrays[f"{i}/y"] = task.x, task.y
        arrays[f"{i}/n_labeled"] = np.array(task.n_labeled)
    np.savez(out, **arrays)


def load_tasks(path: Path) -> list:
    import numpy as np

    from prior_gen.task import Task

    with np.load(path, allow_pickle=False) as data:
        count = len({key.split("/")[0] for key in data.files})
        return [
            Task(data[f"{i}/x"], data[f"{i}/y"], int(data[f"{i}/n_labeled"]))
            for i in range(count)
        ]


def measure(path: Path, device_name: str, attention: str, repeats: int) -> dict:
    """In this (fresh) process: the memory of a first step and the best of ``repeats``."""
    import torch

    from puicl_common.runtime import autocast_for
    from puicl_model.backends import resolve_backend
    from puicl_model.model import PUICLModel
    from trainer.batching import plan_micro_batches
    from trainer.config import load_run_config
    from trainer.ema import WeightEMA
    from trainer.heap import peak_resident_bytes, resident_bytes
    from trainer.optimizers import build_optimizer
    from trainer.step import accumulate_gradients

    config = load_run_config(CONFIG)
    training, device = config.training, torch.device(device_name)
    tasks = load_tasks(path)
    torch.manual_seed(0)
    backend = resolve_backend(attention, device, training=True)
    model = PUICLModel(config.model, attention=backend).to(device)
    ema, optimizer = WeightEMA(model, training.ema_decay), build_optimizer(model, training)
    groups = plan_micro_batches(
        [t.n_rows for t in tasks], [t.n_features for t in tasks], training.micro_batch_size,
        training.micro_batch_cells, training.group_by_rows,
    )  # fmt: skip

    def step() -> float:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        accumulate_gradients(
            model, tasks, groups, 1 / len(tasks), device,
            lambda: autocast_for(training.precision, device),
        )  # fmt: skip
        torch.nn.utils.clip_grad_norm_(model.parameters(), training.optimizer.grad_clip)
        optimizer.step()
        ema.update(model)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    before = resident_bytes()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        allocated = torch.cuda.memory_allocated(device)
    step()
    if device.type == "cuda":
        rise = torch.cuda.max_memory_allocated(device) - allocated
    else:
        rise = peak_resident_bytes() - before
    seconds = min(step() for _ in range(repeats))
    return {
        "features": tasks[0].n_features,
        "tasks": len(tasks),
        "rows": sum(t.n_rows for t in tasks),
        "cells": sum(t.n_rows * (t.n_features + 1) for t in tasks),
        "micro_batches": len(groups),
        "attention": backend,
        "seconds": seconds,
        "peak_rise_gb": rise / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", default="20,50,100", help="feature counts, comma-separated")
    parser.add_argument("--tasks", type=int, default=8, help="tasks in the step")
    parser.add_argument("--step", type=int, default=0, help="which tail step's tasks")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps (best kept)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--attention", default="auto", help="training.attention's choices")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.device, args.attention, args.repeats)))
        return
    features = [int(value) for value in args.features.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for d in features:
            path = Path(scratch) / f"tasks_{d}.npz"
            save_tasks(d, args.tasks, args.step, path)
            command = [sys.executable, __file__, "--child", str(path), "--device", args.device,
                       "--attention", args.attention, "--repeats", str(args.repeats)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"features {d}: the measuring process failed:\n{done.stderr}")
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| features | tasks | rows | cells | micro-batches | attention | s / step "
          "| peak rise GB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['features']} | {r['tasks']} | {r['rows']} | {r['cells']:,} | "
              f"{r['micro_batches']} | {r['attention']} | {r['seconds']:.3f} | "
              f"{r['peak_rise_gb']:.3f} |")  # fmt: skip
    if args.json is not None:
        from puicl_common.atomic import atomic_write_json

        atomic_write_json(args.json, results)


if __name__ == "__main__":
    main()
