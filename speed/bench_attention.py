"""Milliseconds of one attention call, forward and backward, at the shapes of a real training
step, by kernel, with deterministic kernels on and off.

A training step's two attentions (docs/architecture.md §7) have very different shapes: across
features, tens of thousands of sequences of d + 1 ≤ 21 cells; across rows, a few thousand
sequences of hundreds of rows. Both in heads of 16 dimensions. The step's micro-batches are
drawn by the prior generator in this process (``--config``, ``--stage``, the first ``--steps``
steps), laid out as the ``bucketed`` backend lays them out, and every bucket's q, k and v are
attended by each kernel in turn:

* ``flash``, ``efficient``, ``math``: ``scaled_dot_product_attention`` restricted to that one
  of PyTorch's kernels (a kernel that cannot take the shape, or a mask, prints ``n/a``);
* ``products``: :func:`puicl_model.net.backends.bucketed.short_attention`, plain batched
  matrix products (unmasked calls only: the attention across features, and the row buckets
  that need no mask).

Each figure is the median over ``--repeats`` rounds of the summed time of every bucket's call
in the step, forward plus backward, in the step's dtype (bfloat16 on CUDA, float32 on CPU),
with ``torch.use_deterministic_algorithms`` on (``det``) and off (``nondet``); the kernels
take turns within a round, so that a change in the machine's speed touches them alike.

    python -m speed.bench_attention --config configs/paper.yaml --device cuda
    python -m speed.bench_attention --config configs/smoke.yaml --device cpu --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from prior_gen.config import load_generation_config
from prior_gen.generate import generate_step
from puicl_model.net.backends.bucketed import BucketedCells, short_attention
from trainer.batching import collate_with_targets, plan_micro_batches
from trainer.config import load_run_config

KERNELS: dict[str, Callable[[], AbstractContextManager]] = {
    "flash": lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION]),
    "efficient": lambda: sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]),
    "math": lambda: sdpa_kernel([SDPBackend.MATH]),
    "products": nullcontext,
}

# one attention call: (q, k, v) shape [N, H, L, dh] and the key mask [N, 1, L, L] or None
Call = tuple[tuple[int, int, int, int], Tensor | None]


def step_calls(config_path: Path, stage: int, steps: int, device: torch.device,
               ) -> dict[str, list[Call]]:
    """{"features": calls, "rows": calls} of the micro-batches of the first ``steps`` steps of
    ``stage``, cut as the trainer cuts them on one rank."""
    run = load_run_config(config_path)
    prior = load_generation_config(config_path)
    heads = run.model.num_heads
    head_dim = run.model.embed_dim // heads
    calls: dict[str, list[Call]] = {"features": [], "rows": []}
    for step in range(steps):
        tasks = generate_step(prior, "train", stage, step)
        groups = plan_micro_batches([t.x.shape[0] for t in tasks], [t.x.shape[1] for t in tasks],
                                    run.training.micro_batch_size,
                                    run.training.micro_batch_cells, run.training.group_by_rows)
        for group in groups:
            batch, _, _ = collate_with_targets([tasks[i] for i in group])
            for bucket in BucketedCells(batch.to(device)).buckets:
                b, r, c = bucket.n_tasks, bucket.rows, bucket.columns
                calls["features"].append(((b * r, heads, c, head_dim), None))
                mask = None
                if bucket.row_mask is not None:
                    mask = bucket.row_mask[:, None].expand(b, c, r, r).reshape(b * c, 1, r, r)
                calls["rows"].append(((b * c, heads, r, head_dim), mask))
    return calls


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(calls: list[Call], kernel: str, device: torch.device, dtype: torch.dtype,
               generator: torch.Generator) -> float | None:
    """Seconds of every call forward and backward under ``kernel``; None where it cannot run."""
    total = 0.0
    for shape, mask in calls:
        if kernel == "products" and mask is not None:
            return None
        q, k, v = (torch.randn(shape, generator=generator).to(device, dtype).requires_grad_()
                   for _ in range(3))
        _sync(device)
        began = time.perf_counter()
        try:
            with KERNELS[kernel]():
                if kernel == "products":
                    out = short_attention(q, k, v)
                else:
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                out.float().sum().backward()
        except RuntimeError:  # no kernel of this kind for the shape, the mask or the mode
            return None
        _sync(device)
        total += time.perf_counter() - began
    return total


def measure(calls: dict[str, list[Call]], device: torch.device, repeats: int,
            ) -> dict[tuple[str, str, str], float | None]:
    """{(axis, kernel, det|nondet): median ms over the rounds}."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    generator = torch.Generator().manual_seed(0)
    seconds: dict[tuple[str, str, str], list[float | None]] = {}
    was = torch.are_deterministic_algorithms_enabled()
    try:
        for round_ in range(repeats + 1):  # round 0 warms every kernel up, and is not counted
            for mode in ("det", "nondet"):
                torch.use_deterministic_algorithms(mode == "det")
                names = list(KERNELS)
                names = names[round_ % len(names):] + names[:round_ % len(names)]
                for axis, axis_calls in calls.items():
                    for kernel in names:
                        took = time_calls(axis_calls, kernel, device, dtype, generator)
                        if round_ > 0:
                            seconds.setdefault((axis, kernel, mode), []).append(took)
    finally:
        torch.use_deterministic_algorithms(was)
    return {key: None if None in values else 1e3 * statistics.median(values)
            for key, values in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_attention",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/paper.yaml"))
    parser.add_argument("--stage", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    calls = step_calls(args.config, args.stage, args.steps, device)
    for axis, axis_calls in calls.items():
        shapes = sorted({shape for shape, _ in axis_calls})
        masked = sum(mask is not None for _, mask in axis_calls)
        print(f"{axis}: {len(axis_calls)} calls ({masked} masked), [N, H, L, dh] "
              f"{', '.join(str(list(s)) for s in shapes[:6])}{' ...' if len(shapes) > 6 else ''}")
    figures = measure(calls, device, args.repeats)
    print(f"\nms per step, forward + backward, {device}, median of {args.repeats} rounds")
    print(f"{'axis':<9} {'kernel':<10} {'det':>9} {'nondet':>9}")
    for axis in calls:
        for kernel in KERNELS:
            cells = [figures.get((axis, kernel, mode)) for mode in ("det", "nondet")]
            text = [("n/a" if value is None else f"{value:.2f}") for value in cells]
            print(f"{axis:<9} {kernel:<10} {text[0]:>9} {text[1]:>9}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
