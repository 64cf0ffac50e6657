"""What every method shares: its output type, feature preparation, seeded torch training.

Preparation of the baselines' inputs (paper §6 says nothing about it): median imputation of
missing numeric values and standardization to zero mean / unit variance, both computed on all
rows of the task (labeled and unlabeled — the benchmark is transductive, and neither uses a
label). Categorical columns stay ordinal codes, standardized like the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class MethodOutput:
    """What a method returns for the unlabeled rows (in their order in the task)."""

    scores: np.ndarray  # float64 [n_unlabeled], P(y = + | x) or a monotone stand-in
    labels: np.ndarray  # int8 [n_unlabeled], 1 = positive
    pi_hat: float | None = None  # estimated negative share of the pool, when the method has one
    extras: dict[str, float] = field(default_factory=dict)


def check_inputs(X: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validate the (X, s) pair every method receives; return float64 X and bool mask s."""
    X = np.asarray(X, dtype=np.float64)
    s = np.asarray(s).ravel()
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [rows, features], got shape {X.shape}")
    if len(s) != len(X):
        raise ValueError(f"X has {len(X)} rows but s has {len(s)} entries")
    if not np.isin(s, (0, 1)).all():
        raise ValueError("s must be 1 (labeled positive) or 0 (unlabeled) on every row")
    labeled = s == 1
    if labeled.sum() < 2 or (~labeled).sum() < 2:
        raise ValueError(
            f"need at least 2 labeled and 2 unlabeled rows, got {int(labeled.sum())} and "
            f"{int((~labeled).sum())}"
        )
    return X, labeled


def standardize(X: np.ndarray) -> np.ndarray:
    """Median-impute NaN, then scale every column to zero mean and unit variance."""
    X = np.array(X, dtype=np.float64, copy=True)
    missing = np.isnan(X)
    if missing.any():
        medians = np.nanmedian(np.where(missing.all(axis=0), 0.0, X), axis=0)
        X[missing] = np.take(medians, np.nonzero(missing)[1])
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    std[std < 1e-12] = 1.0  # a constant column stays 0 instead of becoming NaN
    return (X - mean) / std


def holdout_split(
    n: int, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random (train, held-out) index split with ``round(fraction · n)`` held out (≥ 1)."""
    order = rng.permutation(n)
    n_out = min(n - 1, max(1, round(fraction * n)))
    return np.sort(order[n_out:]), np.sort(order[:n_out])


@contextlib.contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Run torch code deterministically: fixed seed, one thread, global RNG state restored.

    One intra-op thread makes CPU float results independent of the machine's core count and
    lets the runner use one process per core.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(threads)


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    batch_norm: bool = False,
):
    """A ReLU MLP ``in_dim → hidden… → out_dim`` (optionally batch norm after each hidden)."""
    from torch import nn

    layers: list[nn.Module] = []
    width = in_dim
    for size in hidden:
        layers.append(nn.Linear(width, size))
        if batch_norm:
            layers.append(nn.BatchNorm1d(size))
        layers.append(nn.ReLU())
        width = size
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


def epoch_batches(
    n: int, batch_size: int, generator, drop_singleton: bool = True
) -> list[np.ndarray]:
    """Index batches covering a random permutation of ``range(n)`` once (torch generator)."""
    import torch

    order = torch.randperm(n, generator=generator).numpy()
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if drop_singleton and len(batches) > 1 and len(batches[-1]) < 2:
        batches[-2] = np.concatenate([batches[-2], batches[-1]])
        batches.pop()
    return batches
