"""``model.value_encoder``: the paper's linear cell encoder stays the same bytes, the
radial-basis one is what its docstring says, travels with the weights and is refused when
misnamed. (Every backend against the specification with it: tests/model/test_backends.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_common.configio import ConfigError, from_mapping
from puicl_model.batch import collate_tasks
from puicl_model.config import ModelConfig
from puicl_model.model import RBF_RANGE, PUICLModel, radial_basis
from puicl_model.weights import load_weights, save_weights

SMALL = dict(embed_dim=16, num_layers=1, num_heads=2, ff_dim=24)


def test_the_linear_encoder_adds_nothing_to_the_config_or_the_weights() -> None:
    """Configs, training hashes and weight headers written before the option keep their bytes."""
    linear = ModelConfig(**SMALL)
    assert "value_encoder" not in linear.to_mapping() and "value_bins" not in linear.to_mapping()
    explicit = from_mapping(ModelConfig, {**SMALL, "value_encoder": "linear"}, "model")
    assert explicit.to_mapping() == linear.to_mapping()
    torch.manual_seed(0)
    names = set(PUICLModel(linear).state_dict())
    assert not any(name.startswith("value_basis") for name in names)
    rbf = ModelConfig(**SMALL, value_encoder="rbf")
    assert rbf.to_mapping()["value_encoder"] == "rbf"
    assert set(PUICLModel(rbf).state_dict()) == names | {"value_basis.weight"}


def test_radial_basis_is_the_documented_grid() -> None:
    bins = 7
    z = torch.tensor([-5.0, -RBF_RANGE, -0.3, 0.0, 1.7, RBF_RANGE, 40.0], dtype=torch.float64)
    got = radial_basis(z, bins).numpy()
    centres = np.linspace(-RBF_RANGE, RBF_RANGE, bins)
    width = centres[1] - centres[0]
    want = np.exp(-(((z.numpy()[:, None] - centres[None, :]) / width) ** 2))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[1, 0] == 1.0 and got[5, -1] == 1.0  # a value on a centre
    assert got[-1].max() < 1e-30  # far beyond the grid only the linear channel remains


def test_the_rbf_encoder_adds_a_learned_mix_of_the_basis_to_the_linear_channel() -> None:
    torch.manual_seed(1)
    model = PUICLModel(ModelConfig(**SMALL, value_encoder="rbf", value_bins=5))
    z = torch.randn(3, 4)
    linear = model.feature_encoder(z.unsqueeze(-1))
    basis = radial_basis(z, 5) @ model.value_basis.weight.t()
    torch.testing.assert_close(model.embed_features(z), linear + basis)
    assert basis.abs().max() > 1e-3  # not vacuous: the basis term moves the embedding


def test_rbf_weights_round_trip_and_score(tmp_path) -> None:
    torch.manual_seed(2)
    model = PUICLModel(ModelConfig(**SMALL, value_encoder="rbf", value_bins=6))
    save_weights(model, tmp_path / "w")
    loaded = load_weights(tmp_path / "w")
    assert loaded.config == model.config
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)).astype(np.float32)
    batch = collate_tasks([x], [10])
    model.eval()
    loaded.eval()
    with torch.no_grad():
        assert torch.equal(model(batch), loaded(batch))


@pytest.mark.parametrize(("key", "value", "said"), [
    ("value_encoder", "spline", "value_encoder"),
    ("value_bins", 1, "value_bins"),
])
def test_bad_values_name_their_key(key: str, value, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        from_mapping(ModelConfig, {**SMALL, "value_encoder": "rbf", key: value}, "model")
