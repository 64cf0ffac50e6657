"""uLSIF density-ratio baseline: Kanamori, Hido & Sugiyama (JMLR 2009); PU use as in Hido et
al. (KAIS 2011) and the paper's §6.

The ratio r(x) = p_P(x) / p_U(x) is modelled as r(x) = Σ_l θ_l K(x, c_l), with the Gaussian
kernel K(x, c) = exp(−‖x − c‖² / (2σ²)) and b = min(100, |P|) centres c_l drawn from P:

    Ĥ = (1/n_U) Σ_{u∈U} φ(u) φ(u)ᵀ,   ĥ = (1/n_P) Σ_{p∈P} φ(p),
    θ = max(0, (Ĥ + λ I)⁻¹ ĥ).

σ and λ are chosen over logspace(−3, 1, 9) each by the closed-form leave-one-out score of
Sugiyama's ``uLSIF.m`` (on n_min = min(n_P, n_U) rows of each sample, taken in a seeded random
order instead of the script's first rows). Features are standardized first (the σ grid ignores
scale).

PU use: since p_U = α p_P + (1 − α) p_N, P(y=+ | x ∈ U) = α r(x). The score of an unlabeled
row is r(x) itself (the ranking that the AUC sees); the probability is α̂ r(x) clipped to
[0, 1] and the label is + where it is ≥ 0.5.

Class prior α: not given by uLSIF (1 / max r is unstable). We supply the BBE estimate
(Garg et al. 2021) computed on 2-fold cross-fitted ratios: uLSIF is fitted on one half of P
and U and scores the other half, so BBE sees out-of-sample ratios of P and U. π̂ = 1 − α̂ is
returned. The final ratio is fitted on all rows. Everything is seeded; no densratio package
(unseeded centres, unshuffled LOOCV subset — BASELINES.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benchmark.methods.common import MethodOutput, check_inputs, standardize
from puicl_common.configio import require
from puicl_model.estimator.prior import best_bin_alpha


@dataclass(frozen=True)
class ULSIFConfig:
    n_centres: int = 100
    sigma_grid: tuple[float, ...] = tuple(float(v) for v in np.logspace(-3, 1, 9))
    lambda_grid: tuple[float, ...] = tuple(float(v) for v in np.logspace(-3, 1, 9))
    prior_folds: int = 2

    def validate(self) -> None:
        require(self.n_centres >= 1, "n_centres", f"must be >= 1, got {self.n_centres}")
        require(len(self.sigma_grid) > 0 and min(self.sigma_grid) > 0, "sigma_grid",
                "must be a non-empty list of positive values")
        require(len(self.lambda_grid) > 0 and min(self.lambda_grid) > 0, "lambda_grid",
                "must be a non-empty list of positive values")
        require(self.prior_folds >= 2, "prior_folds", f"must be >= 2, got {self.prior_folds}")


def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d, 0.0)


@dataclass
class RatioModel:
    centres: np.ndarray
    theta: np.ndarray
    sigma: float
    lam: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.exp(-_sq_dist(x, self.centres) / (2 * self.sigma**2)) @ self.theta


def fit_ulsif(x_nu: np.ndarray, x_de: np.ndarray, config: ULSIFConfig,
              rng: np.random.Generator) -> RatioModel:
    """uLSIF estimate of p_nu / p_de with LOOCV over (σ, λ)."""
    n_nu, n_de = len(x_nu), len(x_de)
    b = min(config.n_centres, n_nu)
    centres = x_nu[rng.choice(n_nu, size=b, replace=False)]
    n_min = min(n_nu, n_de)
    sub_nu = rng.permutation(n_nu)[:n_min]
    sub_de = rng.permutation(n_de)[:n_min]
    d_de, d_nu = _sq_dist(x_de, centres), _sq_dist(x_nu, centres)
    best = (np.inf, config.sigma_grid[0], config.lambda_grid[0])
    for sigma in config.sigma_grid:
        k_de = np.exp(-d_de / (2 * sigma**2))  # [n_de, b]
        k_nu = np.exp(-d_nu / (2 * sigma**2))  # [n_nu, b]
        H = k_de.T @ k_de / n_de
        h = k_nu.mean(axis=0)
        kd = k_de[sub_de].T  # [b, n_min]
        kn = k_nu[sub_nu].T
        for lam in config.lambda_grid:
            B = H + np.eye(b) * lam * (n_de - 1) / n_de
            B_inv_h = np.linalg.solve(B, h)
            B_inv_kd = np.linalg.solve(B, kd)
            B_inv_kn = np.linalg.solve(B, kn)
            denom = n_de - (kd * B_inv_kd).sum(axis=0)
            B0 = B_inv_h[:, None] + B_inv_kd * ((h @ B_inv_kd) / denom)[None, :]
            B1 = B_inv_kn + B_inv_kd * ((kn * B_inv_kd).sum(axis=0) / denom)[None, :]
            B2 = np.maximum(0.0, (n_de - 1) / (n_de * (n_nu - 1)) * (n_nu * B0 - B1))
            r_de = (kd * B2).sum(axis=0)
            r_nu = (kn * B2).sum(axis=0)
            score = (r_de @ r_de) / 2 / n_min - r_nu.sum() / n_min
            if score < best[0]:
                best = (score, sigma, lam)
    _, sigma, lam = best
    k_de = np.exp(-d_de / (2 * sigma**2))
    H = k_de.T @ k_de / n_de
    h = np.exp(-d_nu / (2 * sigma**2)).mean(axis=0)
    theta = np.maximum(0.0, np.linalg.solve(H + lam * np.eye(b), h))
    return RatioModel(centres=centres, theta=theta, sigma=float(sigma), lam=float(lam))


@dataclass(frozen=True)
class ULSIF:
    config: ULSIFConfig = ULSIFConfig()
    name: str = "ulsif"
    # bump when a code change alters results: invalidates cached replicates
    version: ClassVar[int] = 1

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput:
        cfg = self.config
        X, labeled = check_inputs(X, s)
        Z = standardize(X)
        z_p, z_u = Z[labeled], Z[~labeled]
        rng = np.random.default_rng(seed)
        # Cross-fitted ratios for the class-prior estimate.
        fold_p = rng.permutation(len(z_p)) % cfg.prior_folds
        fold_u = rng.permutation(len(z_u)) % cfg.prior_folds
        oof_p = np.empty(len(z_p))
        oof_u = np.empty(len(z_u))
        for k in range(cfg.prior_folds):
            model = fit_ulsif(z_p[fold_p != k], z_u[fold_u != k], cfg, rng)
            oof_p[fold_p == k] = model(z_p[fold_p == k])
            oof_u[fold_u == k] = model(z_u[fold_u == k])
        alpha = best_bin_alpha(oof_p, oof_u)
        ratio = fit_ulsif(z_p, z_u, cfg, rng)(z_u)
        prob = np.clip(alpha * ratio, 0.0, 1.0)
        return MethodOutput(
            scores=ratio,
            labels=(prob >= 0.5).astype(np.int8),
            pi_hat=1.0 - alpha,
        )
