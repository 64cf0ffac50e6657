"""safetensors + JSON config on disk: round trips and errors that say what differs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from puicl_model.net.batch import collate_tasks
from puicl_model.net.config import ModelConfig
from puicl_model.net.weights import (
    WeightsError,
    bundled_weights_path,
    load_weights,
    save_weights,
)


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_directory_round_trip_is_bit_identical(small_model, tmp_path) -> None:
    written = save_weights(small_model, tmp_path / "ckpt")
    assert written == tmp_path / "ckpt" / "model.safetensors"
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["config.json",
                                                                     "model.safetensors"]
    loaded = load_weights(tmp_path / "ckpt")
    assert loaded.config == small_model.config and not loaded.training
    assert same_state(loaded, small_model)
    batch = collate_tasks([torch.randn(12, 3)], [4])
    with torch.no_grad():
        assert torch.equal(loaded(batch), small_model(batch))
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["embed_dim"] == 32


def test_each_load_is_a_model_of_its_own_built_once(small_model, tmp_path, monkeypatch) -> None:
    from puicl_model.net import weights

    path = save_weights(small_model, tmp_path / "w.safetensors")
    built = []
    verified_model = weights._verified_model
    monkeypatch.setattr(weights, "_verified_model",
                        lambda found: built.append(found) or verified_model(found))
    first = load_weights(path)
    with torch.no_grad():
        first.decoder[2].bias.add_(1.0)  # a caller's change to its copy
    second = load_weights(tmp_path / "w.safetensors")
    assert built == [path]  # read and checked once
    assert same_state(second, small_model) and not same_state(first, small_model)
    assert second.decoder[2].bias.data_ptr() != first.decoder[2].bias.data_ptr()
    # the same bytes under another name are the same model, kept once
    twin = tmp_path / "twin.safetensors"
    twin.write_bytes(path.read_bytes())
    assert same_state(load_weights(twin), small_model) and built == [path]


def test_the_models_kept_are_bounded(model_factory, tmp_path) -> None:
    from puicl_model.net import weights

    for seed in range(weights.VERIFIED_MODELS.most + 2):
        model = model_factory(seed=seed)
        assert same_state(load_weights(save_weights(model, tmp_path / f"{seed}.safetensors")),
                          model)
    assert len(weights.VERIFIED_MODELS) == weights.VERIFIED_MODELS.most


def test_saving_the_same_weights_writes_the_same_bytes(small_model, tmp_path) -> None:
    # The safetensors library orders the header's metadata differently from save to save;
    # save_weights writes a canonical header, so exports of equal weights compare with cmp.
    files = [save_weights(small_model, tmp_path / f"copy{i}.safetensors") for i in range(5)]
    assert len({path.read_bytes() for path in files}) == 1
    header_size = int.from_bytes(files[0].read_bytes()[:8], "little")
    assert header_size % 8 == 0  # the tensor data stays 8-byte aligned
    assert same_state(load_weights(files[0]), small_model)


def test_single_file_carries_its_config(small_model, tmp_path) -> None:
    path = save_weights(small_model, tmp_path / "alone.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["alone.safetensors"]
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    assert metadata["format"] == "puicl-weights"
    assert json.loads(metadata["model_config"])["ff_dim"] == 48
    assert same_state(load_weights(path), small_model)


def test_shape_mismatch_names_tensor_shapes_and_config_field(small_model, tmp_path) -> None:
    path = save_weights(small_model, tmp_path / "w.safetensors")
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    config = json.loads(metadata["model_config"])
    config["ff_dim"] = 64  # the file's tensors were made with ff_dim=48
    metadata["model_config"] = json.dumps(config)
    save_file(load_file(path), path, metadata=metadata)
    with pytest.raises(WeightsError) as caught:
        load_weights(path)
    assert ("blocks.0.ff.0.weight: shape (48, 32) in file, (64, 32) expected by config "
            "ff_dim=64") in str(caught.value)
    assert "more tensors have other shapes" in str(caught.value)


def test_missing_layers_are_reported_with_num_layers(small_model, tmp_path) -> None:
    path = save_weights(small_model, tmp_path / "w.safetensors")
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    config = json.loads(metadata["model_config"])
    config["num_layers"] = 3
    metadata["model_config"] = json.dumps(config)
    tensors = load_file(path)
    save_file(tensors, path, metadata={k: v for k, v in metadata.items() if k != "tensors_sha256"})
    with pytest.raises(WeightsError, match=r"missing from the file: blocks\.2\.attn_features"
                                           r"\.qkv\.weight.*config num_layers=3"):
        load_weights(path)


def test_config_json_and_metadata_must_agree(small_model, tmp_path) -> None:
    save_weights(small_model, tmp_path)
    load_weights(tmp_path)  # a model verified from these files is kept: the edit must be seen
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_heads"] = 8
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match=r"differ \(num_heads: 4 vs 8\)"):
        load_weights(tmp_path)


def test_invalid_config_is_a_config_error_naming_the_key(small_model, tmp_path) -> None:
    save_weights(small_model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["ff_dimm"] = config.pop("ff_dim")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match=r"model\.ff_dimm: unknown key"):
        load_weights(tmp_path)


def test_modified_tensor_fails_the_checksum(small_model, tmp_path) -> None:
    path = save_weights(small_model, tmp_path / "w.safetensors")
    load_weights(path)  # a model verified from this file is kept: the edit must be seen
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(path)
    tensors["decoder.2.bias"] = tensors["decoder.2.bias"] + 1.0
    save_file(tensors, path, metadata=metadata)
    with pytest.raises(WeightsError, match="checksum mismatch"):
        load_weights(path)


def nan_weights(model_factory, tmp_path) -> Path:
    """Weights with NaN in two tensors, exported with a checksum that matches them (a
    diverged run's EMA)."""
    model = model_factory()
    with torch.no_grad():
        model.decoder[2].bias.fill_(float("nan"))
        next(iter(model.parameters())).view(-1)[0] = float("inf")
    return save_weights(model, tmp_path / "nan")


def test_non_finite_weights_are_refused_at_load(model_factory, tmp_path) -> None:
    path = nan_weights(model_factory, tmp_path)
    with pytest.raises(WeightsError) as refused:
        load_weights(path.parent)
    message = str(refused.value)
    assert message.startswith(f"{path}: values no trained model holds (NaN, infinite ")
    assert "decoder.2.bias (NaN or infinite)" in message and "\n" not in message


def test_finite_but_huge_weights_are_refused_at_load(model_factory, tmp_path) -> None:
    """An EMA scaled by 1e30 is finite, checksummed, and scores every row NaN: refused."""
    model = model_factory()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1e30)
    path = save_weights(model, tmp_path / "huge")
    with pytest.raises(WeightsError) as refused:
        load_weights(path.parent)
    message = str(refused.value)
    assert message.startswith(f"{path}: values no trained model holds")
    assert "above 10000 in magnitude" in message and "\n" not in message


def test_puicl_predict_refuses_non_finite_weights_in_one_line(model_factory, tmp_path,
                                                              capsys) -> None:
    import numpy as np
    import pandas as pd

    from puicl_model.files.cli import main

    path = nan_weights(model_factory, tmp_path)
    table = pd.DataFrame({"x": np.arange(30.0), "s": np.r_[np.ones(10), np.zeros(20)]})
    table.to_csv(tmp_path / "t.csv", index=False)
    assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                 "--weights", str(path.parent), "-o", str(tmp_path / "o.csv")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"puicl predict: error: {path}: values no trained model holds")
    assert error.count("\n") == 1 and not (tmp_path / "o.csv").exists()


def test_unreadable_and_missing_files(tmp_path) -> None:
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a safetensors file at all")
    with pytest.raises(WeightsError, match="is not a readable safetensors file"):
        load_weights(garbage)
    with pytest.raises(WeightsError, match="weights not found"):
        load_weights(tmp_path / "nope.safetensors")
    with pytest.raises(WeightsError, match=r"is a directory without model\.safetensors"):
        load_weights(tmp_path)


def test_foreign_safetensors_without_config_is_rejected(tmp_path) -> None:
    path = tmp_path / "foreign.safetensors"
    save_file({"weight": torch.zeros(2)}, path)
    with pytest.raises(WeightsError, match="carries no model config"):
        load_weights(path)


def test_bundled_checkpoint_is_the_documented_configuration() -> None:
    """The shipped checkpoint loads, verifies and is the model of configs/puicl_cpu.yaml."""
    from puicl_common.configio import load_yaml

    path = bundled_weights_path()
    assert path is not None and path.name == "model.safetensors"
    model = load_weights(path)
    spec = load_yaml(Path(__file__).parents[2] / "configs/puicl_cpu.yaml")
    for key, value in spec["model"].items():
        assert getattr(model.config, key) == value, key
    assert model.parameter_counts()["total"] == 209_858


def test_default_config_round_trip(tmp_path: Path) -> None:
    from puicl_model.net.model import PUICLModel

    model = PUICLModel(ModelConfig())
    loaded = load_weights(save_weights(model, tmp_path / "default"))
    assert loaded.parameter_counts()["total"] == 1_226_882 and same_state(loaded, model)


def test_saved_weights_are_readable_by_others(tmp_path: Path) -> None:
    from puicl_model.net.model import PUICLModel

    written = save_weights(PUICLModel(ModelConfig(embed_dim=8, num_layers=1, num_heads=2,
                                                  ff_dim=8)), tmp_path / "w")
    umask = os.umask(0)
    os.umask(umask)
    for path in (written, written.parent / "config.json"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path


def forge_config(small_model, path: Path, **sizes: int) -> None:
    """Rewrite the config in ``path``'s header to claim ``sizes``, its tensors unchanged."""
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    config = json.loads(metadata["model_config"])
    config.update(sizes)
    metadata["model_config"] = json.dumps(config)
    save_file(load_file(path), path, metadata=metadata)


@pytest.fixture
def no_model_built_for_real(monkeypatch):
    """Fail where a PUICLModel is built with real weights (not on the meta device): a model of
    a forged config would take gigabytes before anything reported the lie."""
    from puicl_model.net.model import PUICLModel

    original = PUICLModel.__init__

    def guarded(self, *args, **kwargs) -> None:
        if torch.get_default_device().type != "meta":
            pytest.fail("a model was built before the file's shapes were checked")
        original(self, *args, **kwargs)

    monkeypatch.setattr(PUICLModel, "__init__", guarded)


def test_a_config_beyond_the_maxima_is_refused_before_any_model_is_built(
        small_model, tmp_path, no_model_built_for_real) -> None:
    path = save_weights(small_model, tmp_path / "w.safetensors")
    forge_config(small_model, path, embed_dim=32768, num_layers=64, num_heads=8, ff_dim=65536)
    with pytest.raises(WeightsError) as caught:
        load_weights(path)
    message = str(caught.value)
    assert "\n" not in message
    assert ("the model config asks for sizes beyond what puicl loads: embed_dim=32768 (at most "
            "4096), ff_dim=65536 (at most 16384); the file is damaged or not PUICL weights"
            ) in message


def test_shapes_are_checked_on_the_header_before_the_model_is_built(
        small_model, tmp_path, no_model_built_for_real) -> None:
    """Sizes within the maxima whose model (about 800 M parameters) the file cannot hold."""
    path = save_weights(small_model, tmp_path / "w.safetensors")
    forge_config(small_model, path, embed_dim=1024, num_layers=64, num_heads=8, ff_dim=4096)
    with pytest.raises(WeightsError) as caught:
        load_weights(path)
    message = str(caught.value)
    assert "does not fit its model config" in message and "\n" not in message
    assert "missing from the file: blocks.2." in message
    assert "feature_encoder.weight: shape (32, 1) in file, (1024, 1) expected" in message


def test_a_tensor_of_integers_is_refused_by_its_header_dtype(small_model, tmp_path) -> None:
    path = save_weights(small_model, tmp_path / "w.safetensors")
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(path)
    tensors["decoder.2.bias"] = tensors["decoder.2.bias"].to(torch.int64)
    save_file(tensors, path, metadata={k: v for k, v in metadata.items()
                                       if k != "tensors_sha256"})
    with pytest.raises(WeightsError, match=r"decoder\.2\.bias: dtype I64 in file, floating "
                                           "point expected"):
        load_weights(path)
