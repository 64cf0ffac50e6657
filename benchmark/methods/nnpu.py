"""nnPU: non-negative PU risk, Kiryo, Niu, du Plessis & Sugiyama (NeurIPS 2017).

With class prior π_p = P(y = + | unlabeled pool) (= α, = 1 − π of this project), classifier
output g(x) and the sigmoid loss ℓ(z) = sigmoid(−z), the empirical risk is (eq. 6 / Alg. 1)

    R(g) = π_p Ê_P[ℓ(g)] + max(−β, Ê_U[ℓ(−g)] − π_p Ê_P[ℓ(−g)]).

When the negative part Ê_U[ℓ(−g)] − π_p Ê_P[ℓ(−g)] falls below −β on a mini-batch, the step
is taken on −γ × that negative part instead (defocusing), β = 0, γ = 1. Score = sigmoid(g(x))
(a monotone map of g), label + where g(x) > 0.

Defaults (authors' chainer code, github kiryor/nnPUlearning): MLP with batch norm,
Adam lr 1e-3, weight decay 0.005, 100 epochs, β = 0, γ = 1, sigmoid loss.

Class prior: nnPU needs π_p. We supply the BBE estimate (Garg et al. 2021) from a P-vs-U
network after the (TED)^n warm start (:func:`benchmark.methods.tedn.estimate_alpha_pvu`), so
nnPU uses no information that the other methods lack. π̂ = 1 − α̂ is returned for the record.

Deviations: the authors' tabular network is the 6-layer, 300-unit MLP of their MNIST runs; we
use 2 hidden layers × 256 with batch norm (CPU cost on the shared machine; on ≤ 1000 rows a
deeper net only overfits faster — docs/benchmark.md), and
mini-batches of 128 unlabeled rows with positives in the same proportion (the authors used
full-dataset-sized batches on MNIST, which on ≤ 1000 rows would mean one step per epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benchmark.methods.common import (
    MethodOutput,
    check_inputs,
    epoch_batches,
    mlp,
    standardize,
    torch_seeded,
)
from benchmark.methods.tedn import TEDnConfig, estimate_alpha_pvu
from puicl_common.configio import require


@dataclass(frozen=True)
class NNPUConfig:
    hidden: tuple[int, ...] = (256, 256)
    epochs: int = 100
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.005
    beta: float = 0.0
    gamma: float = 1.0
    prior_warm_start_epochs: int = 100  # of the PvU network that feeds BBE

    def validate(self) -> None:
        require(all(h > 0 for h in self.hidden), "hidden", f"sizes must be > 0: {self.hidden}")
        require(self.epochs >= 1, "epochs", f"must be >= 1, got {self.epochs}")
        require(self.batch_size >= 2, "batch_size", f"must be >= 2, got {self.batch_size}")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        require(self.beta >= 0, "beta", "must be >= 0")
        require(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        require(self.prior_warm_start_epochs >= 1, "prior_warm_start_epochs", "must be >= 1")


@dataclass(frozen=True)
class NNPU:
    config: NNPUConfig = NNPUConfig()
    name: str = "nnpu"
    # bump when a code change alters results: invalidates cached replicates
    version: ClassVar[int] = 1

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput:
        import torch

        cfg = self.config
        X, labeled = check_inputs(X, s)
        alpha = estimate_alpha_pvu(
            X, labeled.astype(np.int8), seed,
            TEDnConfig(warm_start_epochs=cfg.prior_warm_start_epochs),
        )
        prior = float(np.clip(alpha, 1e-3, 1.0 - 1e-3))
        Z = standardize(X).astype(np.float32)
        with torch_seeded(seed):
            x_p = torch.from_numpy(Z[labeled])
            x_u = torch.from_numpy(Z[~labeled])
            generator = torch.Generator().manual_seed(seed)
            net = mlp(Z.shape[1], cfg.hidden, 1, batch_norm=True)
            optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr,
                                         weight_decay=cfg.weight_decay)

            def sigmoid_loss(z):
                return torch.sigmoid(-z)

            for _ in range(cfg.epochs):
                net.train()
                u_batches = epoch_batches(len(x_u), cfg.batch_size, generator)
                p_size = max(2, int(np.ceil(len(x_p) / len(u_batches))))
                p_batches = epoch_batches(len(x_p), p_size, generator)
                for i, u_b in enumerate(u_batches):
                    p_b = p_batches[i % len(p_batches)]
                    out = net(torch.cat([x_p[p_b], x_u[u_b]])).squeeze(1)
                    g_p, g_u = out[: len(p_b)], out[len(p_b) :]
                    positive_risk = prior * sigmoid_loss(g_p).mean()
                    negative_risk = sigmoid_loss(-g_u).mean() - prior * sigmoid_loss(-g_p).mean()
                    if negative_risk < -cfg.beta:
                        objective = -cfg.gamma * negative_risk
                    else:
                        objective = positive_risk + negative_risk
                    optimizer.zero_grad()
                    objective.backward()
                    optimizer.step()
            net.eval()
            with torch.no_grad():
                g = net(x_u).squeeze(1).double().numpy()
        return MethodOutput(
            scores=1.0 / (1.0 + np.exp(-g)),
            labels=(g > 0).astype(np.int8),
            pi_hat=1.0 - alpha,
        )
