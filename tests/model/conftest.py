"""Fixtures of the model tests: small randomly initialised models and their weight files.

No trained checkpoint exists yet, so every test runs a randomly initialised model. A small
config keeps the tests fast; tests about the exact architecture use the default config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.weights import save_weights

SMALL = ModelConfig(embed_dim=32, num_layers=2, num_heads=4, ff_dim=48)


def make_model(config: ModelConfig = SMALL, seed: int = 0) -> PUICLModel:
    torch.manual_seed(seed)
    model = PUICLModel(config).eval()
    # A random init gives nearly constant outputs; larger decoder weights make the outputs
    # depend visibly on the inputs, so that equality tests compare something non-trivial.
    with torch.no_grad():
        for parameter in model.decoder.parameters():
            parameter.mul_(3.0)
    return model


@pytest.fixture(scope="session")
def small_model() -> PUICLModel:
    return make_model()


@pytest.fixture(scope="session")
def small_weights(tmp_path_factory: pytest.TempPathFactory, small_model: PUICLModel) -> Path:
    """A checkpoint directory (model.safetensors + config.json) of ``small_model``."""
    directory = tmp_path_factory.mktemp("weights") / "small"
    save_weights(small_model, directory)
    return directory


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def pu_table(
    rng: np.random.Generator, n_labeled: int, n_unlabeled: int, n_features: int
) -> tuple[np.ndarray, np.ndarray]:
    """Positives N(0, I), negatives shifted by 2 in every feature; half the pool negative."""
    x_labeled = rng.normal(size=(n_labeled, n_features))
    negatives = n_unlabeled // 2
    x_pool = rng.normal(size=(n_unlabeled, n_features))
    x_pool[:negatives] += 2.0
    x_pool = x_pool[rng.permutation(n_unlabeled)]
    X = np.vstack([x_labeled, x_pool])
    s = np.r_[np.ones(n_labeled, dtype=np.int64), np.zeros(n_unlabeled, dtype=np.int64)]
    return X, s


@pytest.fixture
def table():
    return pu_table


@pytest.fixture(scope="session")
def model_factory():
    """``model_factory(config=SMALL, seed=0)`` -> a fresh randomly initialised model."""
    return make_model


@pytest.fixture(scope="session")
def small_config() -> ModelConfig:
    return SMALL


@pytest.fixture
def table_csv(rng, tmp_path) -> Path:
    """A 40-row CSV table: two numeric features and the label column ``s``."""
    import pandas as pd

    n = 40
    data = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    data["s"] = (np.arange(n) % 4 == 0).astype(int)
    path = tmp_path / "t.csv"
    data.to_csv(path, index=False)
    return path



@pytest.fixture
def one_openmp_thread():
    """The portfolio's gradient boosting on one OpenMP thread: on a busy machine its threads
    wait on each other for minutes on small tables."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="openmp"):
        yield
