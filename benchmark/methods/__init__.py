"""PU methods behind one interface: ``method.fit_predict(X, s, seed) -> MethodOutput``.

``X`` float ``[n, d]`` (NaN allowed), ``s`` 1 on labeled positives and 0 on unlabeled rows;
the output holds, for the unlabeled rows in their order, the score P(y = + | x) (or a
monotone stand-in, stated per method), the hard label (1 = positive) and, where the method
estimates it, π̂ = the negative share of the pool. The same seed gives the same output.

Method names (``puicl-bench --methods``): puicl, ulsif, empu, vpu, tedn, nnpu, elkan-noto,
pu-bagging.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from benchmark.methods.common import MethodOutput
from benchmark.methods.elkan_noto import ElkanNoto, ElkanNotoConfig
from benchmark.methods.empu import EMPU, EMPUConfig
from benchmark.methods.nnpu import NNPU, NNPUConfig
from benchmark.methods.pu_bagging import MissingLibraryError, PUBagging, PUBaggingConfig
from benchmark.methods.puicl import (
    PUICL,
    MissingWeightsError,
    PUICLConfig,
    resolve_weights,
    weights_digest,
)
from benchmark.methods.tedn import TEDn, TEDnConfig
from benchmark.methods.ulsif import ULSIF, ULSIFConfig
from benchmark.methods.vpu import VPU, VPUConfig
from puicl_common.configio import from_mapping, to_dict


class PUMethod(Protocol):
    name: str

    def fit_predict(self, X: np.ndarray, s: np.ndarray, seed: int) -> MethodOutput: ...


# name -> (method class, its config class); puicl is built separately (it needs weights)
BASELINES: dict[str, tuple[type, type]] = {
    "ulsif": (ULSIF, ULSIFConfig),
    "empu": (EMPU, EMPUConfig),
    "vpu": (VPU, VPUConfig),
    "tedn": (TEDn, TEDnConfig),
    "nnpu": (NNPU, NNPUConfig),
    "elkan-noto": (ElkanNoto, ElkanNotoConfig),
    "pu-bagging": (PUBagging, PUBaggingConfig),
}
METHOD_NAMES: tuple[str, ...] = ("puicl", *BASELINES)


def make_method(
    name: str,
    weights: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> PUMethod:
    """Build a method by name; ``overrides`` are config fields (strictly validated)."""
    if name == "puicl":
        config = from_mapping(PUICLConfig, dict(overrides or {}), path="puicl")
        return PUICL(weights=resolve_weights(weights), config=config)
    if name not in BASELINES:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)}")
    method_cls, config_cls = BASELINES[name]
    config = from_mapping(config_cls, dict(overrides or {}), path=name)
    return method_cls(config=config)


def puicl_settings(config: PUICLConfig) -> dict[str, Any]:
    """PUICL's settings as they identify its results, less the weights they were computed
    with: settings added since results were cached enter only away from their legacy value."""
    return {**config.identity(), "_version": PUICL.version}


def method_settings(method: PUMethod) -> dict[str, Any]:
    """The settings that identify a method's results (stored with every cached replicate)."""
    if isinstance(method, PUICL):
        return {"weights_sha256": weights_digest(method.weights),
                **puicl_settings(method.config)}
    settings = to_dict(method.config)  # type: ignore[attr-defined]
    settings["_version"] = method.version  # type: ignore[attr-defined]
    return settings


__all__ = [
    "BASELINES",
    "METHOD_NAMES",
    "MethodOutput",
    "MissingLibraryError",
    "MissingWeightsError",
    "PUMethod",
    "make_method",
    "method_settings",
    "puicl_settings",
]
