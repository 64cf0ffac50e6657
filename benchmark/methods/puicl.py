"""PUICL through its scikit-learn style classifier (paper §3–§5).

``PUICLClassifier(weights=..., device="cpu", random_state=seed)``
is fitted on all rows with ``s`` (1 = labeled positive, 0 = unlabeled); the unlabeled rows'
P(y = +) and hard labels come from one ``predict_and_proba`` on exactly the fitted
unlabeled rows (the classifier's transductive path: one forward pass inside the trained
range), and ``estimate_class_prior()`` gives π̂ (two more scorings of the pool, each with one
of two folds of the labeled positives held out and scored beside it, docs/classifier.md).
The classifier does its own preprocessing (missing values, feature subsets), so it receives the
raw ordinal-coded matrix of the loader.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from benchmark.methods.common import MethodOutput, check_inputs
from puicl_common.configio import require
from puicl_model.estimator.input_checks import THRESHOLD_RULE, is_valid_threshold
from puicl_model.passes.settings import InferenceSettings

if TYPE_CHECKING:
    from puicl_model import PUICLClassifier


def default_weights() -> Path | None:
    """The checkpoint bundled with puicl_model, or None while none ships (then --weights is
    required). This is the one place to change if the benchmark should default elsewhere."""
    from puicl_model.net.weights import bundled_weights_path

    return bundled_weights_path()


class MissingWeightsError(ValueError):
    """PUICL was selected without weights."""


@dataclass(frozen=True)
class PUICLConfig(InferenceSettings):
    """The adapter's settings (``--method-config``: ``puicl: {...}``): the classifier's own
    inference settings, so that their defaults and limits are written once
    (docs/classifier.md explains each), plus the ``threshold`` of its hard labels: 0.5, or
    ``prior`` (the π̂ share of the pool labeled negative), which the accuracy and F1
    columns depend on."""

    threshold: float | str = 0.5

    def validate(self) -> None:
        super().validate()
        require(is_valid_threshold(self.threshold), "threshold",
                f"must be {THRESHOLD_RULE}, got {self.threshold!r}")


@dataclass(frozen=True)
class PUICL:
    weights: Path
    device: str = "cpu"
    name: str = "puicl"
    config: PUICLConfig = field(default_factory=PUICLConfig)

    # the runner passes the dataset's categorical-column flags
    uses_categorical: ClassVar[bool] = True
    # Bump when the adapter or the classifier's default preprocessing/inference changes what a
    # replicate computes (part of the cache key, like the baselines' ``version``). 2: one-hot
    # categorical columns and normal-score numeric columns; 3: π̂ = max(mean, BBE on the
    # model's scores); 4: the threshold setting; 5: n_estimators=None is 2 members on tables
    # with categorical columns; 6: π̂ reads cross-fitted scores (two folds of the labeled
    # positives scored beside the pool); 7: the per-table portfolio (partner "auto") and the
    # identifier rule.
    version: ClassVar[int] = 7

    def classifier(self, seed: int) -> PUICLClassifier:
        """The unfitted classifier of one replicate: every setting of ``config`` (the
        classifier's inference settings and the threshold) passed on by its name."""
        from puicl_model import PUICLClassifier

        # One torch thread: the runner already runs one replicate per core.
        return PUICLClassifier(weights=self.weights, device=self.device, random_state=seed,
                               n_threads=1, progress=False, **self.config.arguments())

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int,
                    categorical: Sequence[bool] | None = None) -> MethodOutput:
        X, labeled = check_inputs(X, s)
        table = as_table(X, categorical)
        clf = self.classifier(seed)
        clf.fit(table, labeled.astype(np.int8))
        x_u = table[~labeled]
        # one scoring for both (rows beyond a pool sample are scored as new rows, at a cost)
        both, hard = clf.predict_and_proba(x_u)
        proba = np.asarray(both, dtype=np.float64)[:, 1]
        labels = np.asarray(hard).astype(np.int8)
        pi_hat = clf.estimate_class_prior()
        return MethodOutput(
            scores=proba, labels=labels, pi_hat=None if pi_hat is None else float(pi_hat)
        )


def as_table(X: np.ndarray, categorical: Sequence[bool] | None) -> np.ndarray | pd.DataFrame:
    """X itself, or a DataFrame whose categorical columns (the loader's ordinal codes) have the
    pandas ``category`` dtype, so that the classifier encodes them as categories."""
    if categorical is None or not any(categorical):
        return X
    if len(categorical) != X.shape[1]:
        raise ValueError(f"categorical has {len(categorical)} flags for {X.shape[1]} columns")
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    for j, flag in enumerate(categorical):
        if flag:
            frame[f"x{j}"] = frame[f"x{j}"].astype("category")
    return frame


def weights_digest(weights: Path) -> str:
    """sha256 of the checkpoint's files: cached results follow the weights' content, not the
    path (a re-exported checkpoint at the same path must not reuse old replicates)."""
    digest = hashlib.sha256()
    if weights.is_dir():
        files = sorted(weights.glob("*"))
    else:
        files = [weights, weights.parent / "config.json"]
    for path in files:
        if path.suffix in (".safetensors", ".json") and path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def resolve_weights(weights: str | Path | None) -> Path:
    """The checkpoint PUICL runs with, or a clear error that says to pass --weights."""
    chosen = Path(weights) if weights is not None else default_weights()
    if chosen is None:
        raise MissingWeightsError(
            "method 'puicl' needs trained weights: pass --weights PATH (a checkpoint directory "
            "or .safetensors file written by `trainer export`); this installation of "
            "puicl_model has no bundled checkpoint"
        )
    if not chosen.exists():
        raise MissingWeightsError(f"--weights {chosen}: no such file or directory")
    return chosen
