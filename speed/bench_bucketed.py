"""Seconds per training step of the ``bucketed`` attention backend, by its row grid.

The ``bucketed`` backend (:mod:`puicl_model.net.backends.bucketed`) puts tasks of equal feature
count whose row counts round up to the same multiple of ``row_grid`` into one bucket and pads
them to the bucket's largest row count. A bucket of unequal row counts then needs a key mask
in its attention across rows, and ``scaled_dot_product_attention`` with a mask cannot take its
fused kernels: it writes the attention weights out, which on tasks of thousands of rows costs
more than the padding saves. ``row_grid = 1`` groups only tasks of equal row counts, so a
training batch never needs a mask, at the price of more, smaller attention calls.

For each config (its prior and model), the first ``--steps`` steps of ``--stage`` are drawn
by the prior generator in this process, and each step's forward and backward pass (bf16
autocast on CUDA, the trainer's loss, no optimizer) is timed under each row grid in turn, the
order rotating by step; the figure is the median over steps. GPU memory: the peak of the last
round. Run on the machine whose figures you report (a GPU: ``--device cuda``)::

    python -m speed.bench_bucketed --configs configs/paper.yaml,configs/puicl_v11_ft_large.yaml \
        --row-grids 32,1 --steps 8 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from prior_gen.config import load_generation_config
from prior_gen.generate import generate_step
from puicl_model.net.backends.bucketed import BucketedCells
from puicl_model.net.model import PUICLModel
from trainer.batching import collate_with_targets
from trainer.config import load_run_config
from trainer.loss import per_task_loss


def timed_step(model: PUICLModel, tasks: list, device: torch.device) -> float:
    """Seconds of one forward and backward pass over ``tasks`` as one micro-batch."""
    batch, targets, unlabeled = collate_with_targets(tasks)
    batch, targets, unlabeled = batch.to(device), targets.to(device), unlabeled.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits = model(batch)
    per_task_loss(logits.float(), targets, unlabeled).sum().backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def measure(config_path: Path, grids: list[int], steps: int, stage: int,
            device: torch.device) -> dict[int, tuple[float, float]]:
    """{row grid: (median seconds per step, GPU peak GB)} for one config."""
    run = load_run_config(config_path)
    prior = load_generation_config(config_path)
    model = PUICLModel(run.model, attention="bucketed").to(device)
    batches = [generate_step(prior, "train", stage, step) for step in range(steps)]
    seconds: dict[int, list[float]] = {grid: [] for grid in grids}
    peaks: dict[int, float] = {}
    timed_step(model, batches[0], device)  # warm-up: kernels chosen, allocator filled
    for index, tasks in enumerate(batches):
        order = grids[index % len(grids):] + grids[: index % len(grids)]
        for grid in order:
            model.layout = lambda batch, grid=grid: BucketedCells(batch, row_grid=grid)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            seconds[grid].append(timed_step(model, tasks, device))
            if device.type == "cuda":
                peaks[grid] = torch.cuda.max_memory_allocated() / 1e9
    return {grid: (statistics.median(seconds[grid]), peaks.get(grid, float("nan")))
            for grid in grids}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="configs/paper.yaml")
    parser.add_argument("--row-grids", default="32,1")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--stage", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    grids = [int(g) for g in args.row_grids.split(",")]
    device = torch.device(args.device)
    print("config | row grid | tasks/step | s/step (median) | tasks/s | GPU peak GB")
    for path in args.configs.split(","):
        tasks = load_run_config(path).curriculum.global_batch
        for grid, (median, peak) in measure(Path(path), grids, args.steps, args.stage,
                                            device).items():
            print(f"{path} | {grid} | {tasks} | {median:.4f} | {tasks / median:.1f} | "
                  f"{peak:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
