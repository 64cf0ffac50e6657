"""Model and classifier performance on this machine (docs/performance.md, "Model" and "Classifier").

Sections (all by default; ``--sections a,b`` picks some):

* ``floor``      matrix-product and attention throughput measured here, the arithmetic floor of
                 one (P=200, n_u=800, d=20) forward pass, and our forward time as a ratio to it.
* ``naive``      our forward vs. a straightforward implementation of the same network
                 (``nn.MultiheadAttention`` per axis with its default ``need_weights=True``,
                 reshapes and transposes, as the public reference implementation does), same
                 weights, same task, timed alternately in one process: a ratio.
* ``pruning``    the packed backend's last block computing the label column only
                 (``DualAxisBlock.label_cells``, ``puicl_model.net.backends.pruned_last_block``)
                 vs. every cell, alternately:
                 forward and forward + backward, as ratios.
* ``classifier`` fit + predict_proba + predict + estimate_class_prior through
                 ``PUICLClassifier`` for (100, 200, 8), (200, 800, 20), (300, 20 000, 60); each
                 case in its own process so that its peak resident memory is its own.
* ``batched``    one forward pass of a 24-task training batch (stage-100 shapes: P in 100..300
                 and d in 5..20 per step, η in 0.5..2 per task) vs. a loop over its tasks,
                 timed alternately: a ratio per batch (``--train``: also forward + backward,
                 for batches small enough to keep activations in memory); then the same
                 ratio for 24 equal tasks of P labeled + 1.25 P unlabeled rows, 10 features,
                 for each P of ``--sweep`` (where batching pays on this machine).
* ``attention``  the attentions of training, one thread: the compiled kernels
                 (``puicl_model.net.backends.cpu_kernel``) vs. PyTorch's kernel, alternately,
                 forward and forward + backward; across rows on [columns, 8 heads, rows, 16] blocks,
                 across features on [rows, 8 heads, columns, 16] blocks; then forward +
                 backward of a 700-row, 15-feature training task through the whole model
                 (backends ``cpu_kernel`` vs. ``packed``).
* ``profile``    where one training pass (700 rows, 15 features, one thread) spends its time,
                 by operator (``torch.profiler``), with the backend of ``--attention``.
* ``chunks``     seconds per scored row of one pass for pool chunks of several sizes next to
                 several labeled-set sizes (20 features), projected to the 20 000-row,
                 60-feature pool (3 feature groups): the trade-off behind the classifier's
                 chunking defaults.

Inference is timed as the classifier runs it (``backends.packed_inference.inference_logits``).

The machine may be shared: compare the ratios (measured side by side); absolute seconds are
as good as the machine was quiet. Timings are the minimum over ``--repeats`` runs.

    .venv/bin/python -m speed.bench_model --json /tmp/bench_model.json
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from puicl_model.net.backends import cpu_kernel
from puicl_model.net.backends.packed import PackedCells, attend_sdpa_features, attend_sdpa_rows
from puicl_model.net.backends.packed_inference import inference_logits
from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.weights import save_weights

CLASSIFIER_CASES = [(100, 200, 8), (200, 800, 20), (300, 20_000, 60)]


def peak_rss_mb() -> float:
    """Peak resident memory of this process image (VmHWM; getrusage's ru_maxrss would also
    count the parent's memory inherited at fork, which survives exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def best_of(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def alternate(functions: dict[str, Callable[[], object]], repeats: int,
              summary: Callable[[list[float]], float] = min) -> dict[str, float]:
    """The ``summary`` (default: the minimum) of each function's times, the functions run in
    turn ``repeats`` times (after one warm-up call of each). Each round starts one function
    later than the one before, so that no function always runs first after another kind of
    work (thread pools gone idle, other caches), which can cost it milliseconds every time."""
    for function in functions.values():
        function()
    times: dict[str, list[float]] = {name: [] for name in functions}
    names = list(functions)
    for round_ in range(repeats):
        start = round_ % len(names)
        for name in names[start:] + names[:start]:
            started = time.perf_counter()
            functions[name]()
            times[name].append(time.perf_counter() - started)
    return {name: summary(values) for name, values in times.items()}


def pu_task(rng: np.random.Generator, n_labeled: int, n_unlabeled: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n_labeled + n_unlabeled, d)).astype(np.float32)
    x[n_labeled + n_unlabeled // 2 :] += 1.0
    return x


# ------------------------------------------------------------------------------------ floor
def forward_flops(rows: int, columns: int, config: ModelConfig, pruned: bool = True
                  ) -> dict[str, float]:
    """Multiply-add FLOPs (2 per MAC) of one forward pass, by kind.

    ``pruned``: what the model computes -- its last block projects keys and values for all
    cells and does the rest for the label column only (docs/architecture.md §7). Otherwise
    every block computes every cell (the issue's ≈ 115 GFLOP for (200, 800, 20)).
    """
    e, ff, layers = config.embed_dim, config.ff_dim, config.num_layers
    cells = rows * columns
    per_cell = 2 * (2 * 4 * e * e + 2 * e * ff)  # q/k/v + output of 2 attentions, feed-forward
    full_layers = layers - 1 if pruned else layers
    linear = full_layers * cells * per_cell
    row_attention = full_layers * columns * 4 * rows * rows * e
    feature_attention = full_layers * rows * 4 * columns * columns * e
    if pruned:  # the last block
        linear += cells * 2 * 2 * e * e + rows * (per_cell - 2 * 2 * e * e)
        row_attention += 4 * rows * rows * e
        feature_attention += rows * 4 * columns * e
    return {"linear": linear, "row_attention": row_attention,
            "feature_attention": feature_attention}


def section_floor(args: argparse.Namespace) -> dict:
    """Throughput of this machine's kernels and the floor they set for one forward pass:
    the FLOPs the model computes (its pruned last block) and, as the issue counts them,
    those of every block computing every cell."""
    model = PUICLModel().eval()
    rng = np.random.default_rng(0)
    batch = collate_tasks([pu_task(rng, 200, 800, 20)], [200])
    flops = forward_flops(1000, 21, model.config)
    heads, e = model.config.num_heads, model.config.embed_dim
    a = torch.randn(21_000, e)
    w = torch.randn(3 * e, e)
    q, k, v = (torch.randn(21, heads, 1000, e // heads) for _ in range(3))
    with torch.inference_mode():
        times = alternate(
            {
                "gemm": lambda: torch.mm(a, w.t()),
                "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
                "forward": lambda: inference_logits(model, batch),
            },
            args.repeats,
        )
    gemm_rate = 2 * 21_000 * e * 3 * e / times["gemm"]
    sdpa_rate = 4 * 21 * 1000 * 1000 * e / times["sdpa"]
    floor = flops["linear"] / gemm_rate + flops["row_attention"] / sdpa_rate
    full = forward_flops(1000, 21, model.config, pruned=False)
    full_floor = full["linear"] / gemm_rate + full["row_attention"] / sdpa_rate
    return {
        "gemm_gflops": gemm_rate / 1e9,
        "sdpa_gflops": sdpa_rate / 1e9,
        "forward_gflop": {k: v / 1e9 for k, v in flops.items()},
        "forward_gflop_every_cell": {k: v / 1e9 for k, v in full.items()},
        "floor_s": floor,
        "floor_every_cell_s": full_floor,
        "forward_s": times["forward"],
        "forward_over_floor": times["forward"] / floor,
    }


# ------------------------------------------------------------------------------------ naive
class NaiveBlock(nn.Module):
    """The dual-axis block written the straightforward way (dense [B, R, C, e] tensor)."""

    def __init__(self, e: int, heads: int, ff: int) -> None:
        super().__init__()
        self.features = nn.MultiheadAttention(e, heads, batch_first=True)
        self.rows = nn.MultiheadAttention(e, heads, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(e, ff), nn.Linear(ff, e)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(e), nn.LayerNorm(e), nn.LayerNorm(e)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, r, c, e = h.shape
        flat = h.reshape(b * r, c, e)
        h = self.norm1((self.features(flat, flat, flat)[0] + flat).reshape(b, r, c, e))
        cols = h.transpose(1, 2).reshape(b * c, r, e)
        cols = self.rows(cols, cols, cols)[0] + cols
        h = self.norm2(cols.reshape(b, c, r, e).transpose(1, 2))
        return self.norm3(self.linear2(F.gelu(self.linear1(h))) + h)


class NaiveModel(nn.Module):
    """Same function as PUICLModel for one unpadded task, built from stock modules."""

    def __init__(self, ours: PUICLModel) -> None:
        super().__init__()
        config = ours.config
        self.ours = ours
        self.blocks = nn.ModuleList(
            NaiveBlock(config.embed_dim, config.num_heads, config.ff_dim)
            for _ in range(config.num_layers)
        )
        with torch.no_grad():
            for naive, block in zip(self.blocks, ours.blocks, strict=True):
                for mha, attention in ((naive.features, block.attn_features),
                                       (naive.rows, block.attn_rows)):
                    mha.in_proj_weight.copy_(attention.qkv.weight)
                    mha.in_proj_bias.copy_(attention.qkv.bias)
                    mha.out_proj.weight.copy_(attention.out.weight)
                    mha.out_proj.bias.copy_(attention.out.bias)
                naive.linear1.load_state_dict(block.ff[0].state_dict())
                naive.linear2.load_state_dict(block.ff[2].state_dict())
                naive.norm1.load_state_dict(block.norm_features.state_dict())
                naive.norm2.load_state_dict(block.norm_rows.state_dict())
                naive.norm3.load_state_dict(block.norm_ff.state_dict())

    def forward(self, x: torch.Tensor, n_labeled: int) -> torch.Tensor:
        ours = self.ours
        labeled = x[:, :n_labeled]
        mean = labeled.mean(1, keepdim=True)
        std = labeled.std(1, keepdim=True, unbiased=False).clamp_min(1e-8)
        z = ((x - mean) / std).clamp(-100, 100).unsqueeze(-1)
        cells = ours.feature_encoder(z)
        label = torch.zeros(x.shape[0], x.shape[1], 1, 1)
        label[:, :n_labeled] = 1.0
        label_cells = torch.where(
            label > 0, ours.target_encoder(label), ours.unlabeled_token.expand_as(cells[:, :, :1])
        )
        h = torch.cat([cells, label_cells], dim=2)
        for block in self.blocks:
            h = block(h)
        return ours.decoder(h[:, :, -1])


def section_naive(args: argparse.Namespace) -> dict:
    ours = PUICLModel().eval()
    naive = NaiveModel(ours).eval()
    rng = np.random.default_rng(0)
    x = pu_task(rng, 200, 800, 20)
    batch = collate_tasks([x], [200])
    dense = torch.from_numpy(x).unsqueeze(0)
    with torch.no_grad():
        difference = (naive(dense, 200) - ours(batch)).abs()[0, 200:].max().item()
        times = alternate({"ours": lambda: ours(batch), "naive": lambda: naive(dense, 200)},
                          args.repeats)
    return {"ours_s": times["ours"], "naive_s": times["naive"],
            "naive_over_ours": times["naive"] / times["ours"], "max_abs_difference": difference}


# ------------------------------------------------------------------------------- classifier
def classifier_child(case: str, weights: str, repeats: int) -> dict:
    from puicl_model import PUICLClassifier

    n_labeled, n_unlabeled, d = (int(v) for v in case.split(","))
    rng = np.random.default_rng(0)
    X = pu_task(rng, n_labeled, n_unlabeled, d).astype(np.float64)
    s = np.r_[np.ones(n_labeled, dtype=int), np.zeros(n_unlabeled, dtype=int)]
    warm = PUICLClassifier(weights=weights, device="cpu", progress=False)
    warm.fit(X[: n_labeled + 10], s[: n_labeled + 10]).predict_proba(X[n_labeled : n_labeled + 10])
    rss_before = peak_rss_mb()
    times, passes = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        clf = PUICLClassifier(weights=weights, device="cpu", random_state=0, progress=False)
        clf.fit(X, s)
        clf.predict_proba(X[s == 0])
        clf.predict(X[s == 0])
        clf.estimate_class_prior()
        times.append(time.perf_counter() - started)
        passes = clf.n_passes_
    return {"case": case, "seconds_min": min(times), "seconds_all": times, "passes": passes,
            "peak_rss_mb": peak_rss_mb(), "rss_before_mb": rss_before,
            "threads": torch.get_num_threads()}


def section_classifier(args: argparse.Namespace) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as directory:
        torch.manual_seed(0)
        save_weights(PUICLModel(), directory)
        for n_labeled, n_unlabeled, d in CLASSIFIER_CASES:
            repeats = 1 if n_unlabeled > 5000 else args.repeats
            command = [sys.executable, __file__, "--child", f"{n_labeled},{n_unlabeled},{d}",
                       "--weights", directory, "--repeats", str(repeats)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"  classifier {result['case']}: {result['seconds_min']:.2f} s, "
                  f"{result['passes']} passes, peak RSS {result['peak_rss_mb']:.0f} MB",
                  flush=True)
            results.append(result)
    return results


# ---------------------------------------------------------------------------------- batched
def stage100_batch(rng: np.random.Generator, tasks: int = 24) -> tuple[list, list]:
    n_labeled = int(rng.integers(100, 301))
    d = int(rng.integers(5, 21))
    xs = [pu_task(rng, n_labeled, int(np.ceil(n_labeled * rng.uniform(0.5, 2.0))), d)
          for _ in range(tasks)]
    return xs, [n_labeled] * tasks


def forward_batched_vs_loop(model: PUICLModel, batch, singles: list, repeats: int) -> dict:
    """No-grad forward of ``batch`` in one call vs. of its tasks ``singles`` one by one."""

    def loop() -> None:
        for single in singles:
            inference_logits(model, single)

    with torch.inference_mode():
        forward = alternate({"batched": lambda: inference_logits(model, batch), "loop": loop},
                            repeats)
    return {"forward_batched_s": forward["batched"], "forward_loop_s": forward["loop"],
            "forward_loop_over_batched": forward["loop"] / forward["batched"]}


def section_batched(args: argparse.Namespace) -> dict:
    model = PUICLModel().eval()
    rng = np.random.default_rng(2026)
    rows = []
    for step in range(args.batches):
        xs, n_labeled = stage100_batch(rng)
        batch = collate_tasks(xs, n_labeled)
        singles = [collate_tasks([x], [n]) for x, n in zip(xs, n_labeled, strict=True)]
        cells = sum(x.shape[0] * (x.shape[1] + 1) for x in xs)
        row = {"step": step, "n_labeled": n_labeled[0], "d": xs[0].shape[1],
               "rows": [x.shape[0] for x in xs], "cells": cells,
               **forward_batched_vs_loop(model, batch, singles, args.repeats)}
        message = (f"  batch {step}: P={row['n_labeled']} d={row['d']} ({cells} cells): forward "
                   f"loop/batched {row['forward_loop_over_batched']:.2f}")
        # Training activations take ~10 kB per cell: only small batches go through backward
        # in one piece here (the trainer's own benchmark covers micro-batching).
        if args.train and cells <= args.train_max_cells:

            def train_batched(batch=batch) -> None:
                model.zero_grad(set_to_none=True)
                model(batch)[batch.unlabeled_mask].sum().backward()

            def train_loop(singles=singles) -> None:
                model.zero_grad(set_to_none=True)
                for single in singles:
                    model(single)[single.unlabeled_mask].sum().backward()

            train = alternate({"batched": train_batched, "loop": train_loop},
                              max(1, args.repeats // 2))
            row.update({"train_batched_s": train["batched"], "train_loop_s": train["loop"],
                        "train_loop_over_batched": train["loop"] / train["batched"]})
            message += f", fwd+bwd loop/batched {row['train_loop_over_batched']:.2f}"
        print(message, flush=True)
        rows.append(row)
    total_loop = sum(r["forward_loop_s"] for r in rows)
    total_batched = sum(r["forward_batched_s"] for r in rows)
    # Where batching pays: 24 equal-shaped tasks of P labeled rows, 1.25 P unlabeled rows and
    # 10 features, for P from tiny to training-sized.
    sweep = []
    for n_labeled in (int(v) for v in args.sweep.split(",") if v):
        xs = [pu_task(rng, n_labeled, (5 * n_labeled) // 4, 10) for _ in range(24)]
        batch = collate_tasks(xs, [n_labeled] * 24)
        singles = [collate_tasks([x], [n_labeled]) for x in xs]
        sweep.append({"n_labeled": n_labeled, "rows": xs[0].shape[0], "d": 10,
                      **forward_batched_vs_loop(model, batch, singles, args.repeats)})
        print(f"  24 tasks of {xs[0].shape[0]} rows x 10 features: loop/batched "
              f"{sweep[-1]['forward_loop_over_batched']:.2f}", flush=True)
    return {"batches": rows, "forward_loop_over_batched_overall": total_loop / total_batched,
            "sweep": sweep}


def forward_backward(model: PUICLModel, batch) -> None:
    """One training-like pass: forward, a scalar of the unlabeled rows' logits, backward."""
    model.zero_grad(set_to_none=True)
    model(batch)[batch.unlabeled_mask].logsumexp(-1).sum().backward()


# ---------------------------------------------------------------------------------- pruning
def logits_every_cell(model: PUICLModel, batch) -> torch.Tensor:
    """The packed backend's forward with the last block computed for every cell."""
    cells = PackedCells.of(batch)
    h = model.embed(batch, cells)
    for block in model.blocks:
        h = block(h, cells)
    return cells.scatter_rows(model.decoder(cells.label_cells(h)).float())


def section_pruning(args: argparse.Namespace) -> dict:
    """The last block computing the label column only vs. every cell, same model, alternately:
    forward of the (200, 800, 20) task and of one classifier forward of a chunked pool (5
    passes of 100 labeled + 200 pool rows, 20 features), forward + backward of a 700-row,
    15-feature training task. Both through the differentiable blocks (backend ``packed``)."""
    model = PUICLModel(attention="packed")
    rng = np.random.default_rng(0)
    single = collate_tasks([pu_task(rng, 200, 800, 20)], [200])
    chunks = collate_tasks([pu_task(rng, 100, 200, 20) for _ in range(5)], [100] * 5)
    train = collate_tasks([pu_task(rng, 250, 450, 15)], [250])

    def forward(batch, prune: bool) -> Callable[[], object]:
        def run() -> None:
            with torch.inference_mode():
                model(batch) if prune else logits_every_cell(model, batch)
        return run

    def train_pass(prune: bool) -> Callable[[], object]:
        def run() -> None:
            model.zero_grad(set_to_none=True)
            logits = model(train) if prune else logits_every_cell(model, train)
            logits[train.unlabeled_mask].logsumexp(-1).sum().backward()
        return run

    results = {}
    for name, functions in {
        "forward (200, 800, 20)": {"every_cell": forward(single, False),
                                   "pruned": forward(single, True)},
        "forward 5 x (100 + 200, 20)": {"every_cell": forward(chunks, False),
                                        "pruned": forward(chunks, True)},
        "forward + backward (250 + 450, 15)": {"every_cell": train_pass(False),
                                               "pruned": train_pass(True)},
    }.items():
        times = alternate(functions, args.repeats)
        results[name] = {**times, "every_cell_over_pruned": times["every_cell"] / times["pruned"]}
        print(f"  {name}: every cell {times['every_cell']:.3f} s, pruned {times['pruned']:.3f} s"
              f" ({results[name]['every_cell_over_pruned']:.2f}x)", flush=True)
    return results


# -------------------------------------------------------------------------------- attention
def section_attention(args: argparse.Namespace) -> dict:
    """Compiled attention kernel vs. PyTorch's, alternately, on one thread (the trainer's
    2-process layout gives each process one)."""
    try:
        cpu_kernel.load_kernel()
    except cpu_kernel.KernelUnavailable as error:
        print(f"  kernel not available: {error}", flush=True)
        return {"status": str(error)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    heads = 8
    generator = torch.Generator().manual_seed(0)

    def attention(qkv: torch.Tensor, backward: bool,
                  attend: Callable[[torch.Tensor, int], torch.Tensor]) -> Callable[[], object]:
        grad = torch.randn(qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3, generator=generator)

        def run() -> None:
            leaf = qkv.detach().requires_grad_(True)  # the kernels serve training only
            out = attend(leaf, heads)
            if backward:
                out.backward(grad)
        return run

    def sdpa_rows(qkv: torch.Tensor, heads: int) -> torch.Tensor:
        return attend_sdpa_rows(qkv, heads, qkv.shape[1])

    results: dict = {}
    blocks = [("rows", cpu_kernel.attend_rows, sdpa_rows, columns, rows)
              for columns, rows in [(20, 700), (12, 400), (20, 300)]]
    blocks += [("features", cpu_kernel.attend_features, attend_sdpa_features, columns, rows)
               for columns, rows in [(16, 700), (20, 700), (6, 400)]]
    try:
        for axis, kernel, pytorch, columns, rows in blocks:
            qkv = torch.randn(columns, rows, 3 * 16 * heads, generator=generator)
            shape = (f"[{columns}, {heads}, {rows}, 16]" if axis == "rows"
                     else f"[{rows}, {heads}, {columns}, 16]")
            for backward in (False, True):
                name = f"across {axis} {shape} " + (
                    "forward + backward" if backward else "forward")
                times = alternate({"pytorch": attention(qkv, backward, pytorch),
                                   "kernel": attention(qkv, backward, kernel)},
                                  args.repeats)
                ratio = times["pytorch"] / times["kernel"]
                results[name] = {**times, "pytorch_over_kernel": ratio}
                print(f"  {name}: PyTorch {1e3 * times['pytorch']:.1f} ms, kernel "
                      f"{1e3 * times['kernel']:.1f} ms ({ratio:.2f}x)", flush=True)
        model = PUICLModel()
        train = collate_tasks([pu_task(np.random.default_rng(0), 250, 450, 15)], [250])

        def step(backend: str) -> Callable[[], object]:
            def run() -> None:
                model.attention = backend
                forward_backward(model, train)
            return run

        times = alternate({"pytorch": step("packed"), "kernel": step("cpu_kernel")},
                          args.repeats)
        name = "model forward + backward (250 + 450, 15)"
        results[name] = {**times, "pytorch_over_kernel": times["pytorch"] / times["kernel"]}
        print(f"  {name}: PyTorch {times['pytorch']:.3f} s, kernel {times['kernel']:.3f} s "
              f"({results[name]['pytorch_over_kernel']:.2f}x)", flush=True)
    finally:
        torch.set_num_threads(threads)
    return results


# ---------------------------------------------------------------------------------- profile
def section_profile(args: argparse.Namespace) -> dict:
    """Self CPU time per operator of one training pass, one thread (the third of three)."""
    from torch.profiler import profile

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = PUICLModel(attention=args.attention)
        train = collate_tasks([pu_task(np.random.default_rng(0), 250, 450, 15)], [250])
        forward_backward(model, train)
        forward_backward(model, train)
        with profile() as profiler:
            forward_backward(model, train)
    finally:
        torch.set_num_threads(threads)
    events = sorted(profiler.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(event.self_cpu_time_total for event in events)
    shares = {event.key: event.self_cpu_time_total / total for event in events[:10]}
    print(f"  one pass: {total / 1e6:.2f} s of CPU", flush=True)
    for name, share in shares.items():
        print(f"  {100 * share:5.1f} %  {name}", flush=True)
    return {"cpu_seconds": total / 1e6, "self_cpu_share": shares}


# ----------------------------------------------------------------------------------- chunks
def section_chunks(args: argparse.Namespace) -> list[dict]:
    model = PUICLModel().eval()
    rng = np.random.default_rng(1)
    configs = [(300, 1024), (300, 600), (300, 300), (150, 300), (128, 256), (100, 200), (64, 128)]
    batches = {
        (labeled, chunk): collate_tasks([pu_task(rng, labeled, chunk, 20)], [labeled])
        for labeled, chunk in configs
    }
    with torch.inference_mode():
        times = alternate(
            {f"{key}": (lambda batch=batch: inference_logits(model, batch))
             for key, batch in batches.items()},
            max(1, args.repeats // 2),
        )
    results = []
    for labeled, chunk in configs:
        seconds = times[f"{(labeled, chunk)}"]
        per_row = seconds / chunk
        results.append({"labeled": labeled, "chunk": chunk, "pass_s": seconds,
                        "ms_per_row": 1e3 * per_row,
                        "projected_20000x60_s": 3 * 20_000 * per_row})
        print(f"  P={labeled} chunk={chunk}: pass {seconds:.3f} s, {1e3 * per_row:.2f} ms/row "
              f"-> 20000 rows x 3 feature groups {3 * 20_000 * per_row:.0f} s", flush=True)
    return results


SECTIONS = {"floor": section_floor, "naive": section_naive, "pruning": section_pruning,
            "classifier": section_classifier,
            "batched": section_batched, "attention": section_attention,
            "profile": section_profile, "chunks": section_chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=3, help="24-task batches to time")
    parser.add_argument("--sweep", default="4,16,64,200",
                        help="section batched: labeled-row counts of the equal-shaped batches")
    parser.add_argument("--train", action="store_true",
                        help="also time forward + backward of batches up to --train-max-cells")
    parser.add_argument("--train-max-cells", type=int, default=150_000)
    parser.add_argument("--attention", default="packed", choices=["packed", "cpu_kernel"],
                        help="section profile: the attention backend of the training pass")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--weights", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(classifier_child(args.child, args.weights, args.repeats)))
        return
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"torch threads, torch {torch.__version__}",
    }
    for name in args.sections.split(","):
        print(f"{name} ...", flush=True)
        report[name] = SECTIONS[name](args)
        if name != "classifier":
            print(json.dumps(report[name], indent=1, default=float)[:2000], flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=float))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
