"""EMPU: semiparametric PU learning under the exponential-tilt model, fitted by EM.

Liu, Yeh, Zhang, Tian & Li, "Positive and Unlabeled Data: Model, Estimation, Inference, and
Classification", JASA 2025 (arXiv 2407.09735); authors' R package github SiyanLiu-stat/PUEM
(SETM, the SCAR version used here). Our own numpy code after reading the paper.

Model: labeled P ~ f₊ (n rows); unlabeled U ~ α f₊ + (1 − α) f₋ (m rows), with the
exponential tilt f₋(x) = exp(a + bᵀx) f₊(x) and f₊ left unspecified (empirical likelihood).

* E-step: for u ∈ U, w(u) = α / (α + (1 − α) exp(a + bᵀu)) = P(y = + | u).
* M-step: α = mean_U w. Given the weights, the complete data are a two-sample density-ratio
  problem: "positives" = P (weight 1) ∪ U (weights w), "negatives" = U (weights 1 − w). Its
  empirical-likelihood estimate of (a, b) is the weighted logistic regression of negative vs
  positive with slope b and intercept β₀, corrected to a = β₀ − log(N₋ / N₊) with
  N₊ = n + Σw, N₋ = Σ(1 − w) (Qin 1998); we add the authors' ridge penalty
  λ = (n + m)^(−3/2) on b.
* Observed profile log-EL (monitored for convergence and to choose among restarts):
  ℓ = −Σ_{all rows z} log(N₊ + N₋ e^{a + bᵀz}) + Σ_U log(α + (1 − α) e^{a + bᵀu}) − λ‖b‖²/2,
  with N₊ = n + mα, N₋ = m(1 − α).
* Stop when ℓ gains less than 1e-4 or after 1000 iterations; 9 random restarts
  (α₀ ~ U(0.05, 0.95), b₀ ~ N(0, 0.1²)), keep the best ℓ.
* Output: score w(u) = P(y = + | u); label + where w > 0.5; π̂ = 1 − α̂.

Deviations: features are standardized (ordinal codes for categorical columns, no one-hot:
the tilt stays linear in the same inputs the other baselines see); the M-step runs a few
damped Newton steps warm-started from the previous iterate instead of solving it exactly
(EM remains a monotone-in-practice ascent; convergence is checked on ℓ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import expit, log_expit

from benchmark.methods.common import MethodOutput, check_inputs, standardize
from puicl_common.configio import require

_ETA_CLIP = 50.0


@dataclass(frozen=True)
class EMPUConfig:
    restarts: int = 9
    max_iter: int = 1000
    tol: float = 1e-4
    newton_steps: int = 3

    def validate(self) -> None:
        require(self.restarts >= 1, "restarts", f"must be >= 1, got {self.restarts}")
        require(self.max_iter >= 1, "max_iter", f"must be >= 1, got {self.max_iter}")
        require(self.tol > 0, "tol", f"must be positive, got {self.tol}")
        require(self.newton_steps >= 1, "newton_steps", "must be >= 1")


def _weighted_logistic_newton(D, y, weight, beta, ridge, steps):
    """A few Newton steps for weighted logistic regression (penalty on slopes only)."""
    penalty = np.full(D.shape[1], ridge)
    penalty[0] = 0.0

    def objective(bt):
        eta = np.clip(D @ bt, -_ETA_CLIP, _ETA_CLIP)
        ll = weight * (y * log_expit(eta) + (1 - y) * log_expit(-eta))
        return -ll.sum() + 0.5 * (penalty * bt * bt).sum()

    current = objective(beta)
    for _ in range(steps):
        p = expit(np.clip(D @ beta, -_ETA_CLIP, _ETA_CLIP))
        grad = D.T @ (weight * (p - y)) + penalty * beta
        hess = (D * (weight * p * (1 - p))[:, None]).T @ D + np.diag(penalty + 1e-8)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-4:
            candidate = beta - t * step
            value = objective(candidate)
            if value <= current:
                beta, current = candidate, value
                break
            t /= 2
        else:
            break
    return beta


def _log_el(eta_all, eta_u, alpha, n, m, b, ridge):
    n_pos, n_neg = n + m * alpha, m * (1 - alpha)
    term_all = -np.logaddexp(np.log(n_pos), np.log(max(n_neg, 1e-300)) + eta_all).sum()
    term_u = np.logaddexp(np.log(alpha), np.log1p(-alpha) + eta_u).sum()
    return term_all + term_u - 0.5 * ridge * float(b @ b)


def fit_empu(z_p: np.ndarray, z_u: np.ndarray, config: EMPUConfig, rng: np.random.Generator):
    """Best-of-restarts EM fit; returns (alpha, a, b, log-EL)."""
    n, m = len(z_p), len(z_u)
    d = z_p.shape[1]
    ridge = (n + m) ** -1.5
    z_all = np.vstack([z_p, z_u])
    # Complete-data design: P (pos), U as pos (weight w), U as neg (weight 1 − w).
    D = np.hstack([np.ones((n + 2 * m, 1)), np.vstack([z_p, z_u, z_u])])
    y = np.concatenate([np.zeros(n + m), np.ones(m)])
    best = None
    for _ in range(config.restarts):
        alpha = float(rng.uniform(0.05, 0.95))
        b = rng.normal(0.0, 0.1, size=d)
        a = 0.0
        beta = np.concatenate([[0.0], b])
        previous = -np.inf
        for _ in range(config.max_iter):
            eta_u = np.clip(a + z_u @ b, -_ETA_CLIP, _ETA_CLIP)
            w = expit(np.log(alpha) - np.log1p(-alpha) - eta_u)
            alpha = float(np.clip(w.mean(), 1e-6, 1 - 1e-6))
            weight = np.concatenate([np.ones(n), w, 1.0 - w])
            beta = _weighted_logistic_newton(D, y, weight, beta, ridge, config.newton_steps)
            n_pos, n_neg = n + w.sum(), (1.0 - w).sum()
            b = beta[1:]
            a = float(beta[0] - np.log(max(n_neg, 1e-12) / n_pos))
            eta_all = np.clip(a + z_all @ b, -_ETA_CLIP, _ETA_CLIP)
            eta_u = eta_all[n:]
            value = _log_el(eta_all, eta_u, alpha, n, m, b, ridge)
            if abs(value - previous) < config.tol:
                break
            previous = value
        if best is None or value > best[3]:
            best = (alpha, a, b.copy(), value)
    assert best is not None
    return best


@dataclass(frozen=True)
class EMPU:
    config: EMPUConfig = EMPUConfig()
    name: str = "empu"
    # bump when a code change alters results: invalidates cached replicates
    version: ClassVar[int] = 1

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput:
        X, labeled = check_inputs(X, s)
        Z = standardize(X)
        rng = np.random.default_rng(seed)
        alpha, a, b, _ = fit_empu(Z[labeled], Z[~labeled], self.config, rng)
        eta_u = np.clip(a + Z[~labeled] @ b, -_ETA_CLIP, _ETA_CLIP)
        w = expit(np.log(alpha) - np.log1p(-alpha) - eta_u)
        return MethodOutput(scores=w, labels=(w > 0.5).astype(np.int8), pi_hat=1.0 - alpha)
