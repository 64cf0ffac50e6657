"""``trainer interpolate``: the line between two exported models of one configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from puicl_model.net.weights import load_weights, save_weights
from trainer.cli import main as trainer_main
from trainer.interpolation import interpolate_weights

SMALL = ModelConfig(embed_dim=16, num_heads=2, num_layers=1, ff_dim=32, max_features=5)


def _exported(tmp_path: Path, seed: int, config: ModelConfig = SMALL) -> Path:
    torch.manual_seed(seed)
    return save_weights(PUICLModel(config), tmp_path / f"w{seed}").parent


def test_the_weight_walks_from_the_first_model_to_the_second(tmp_path: Path) -> None:
    a, b = _exported(tmp_path, 0), _exported(tmp_path, 1)
    start, end = load_weights(a).state_dict(), load_weights(b).state_dict()
    for weight, expected in ((0.0, start), (1.0, end)):
        got = interpolate_weights(a, b, weight).state_dict()
        assert all(torch.equal(got[name], expected[name]) for name in expected)
    half = interpolate_weights(a, b, 0.25).state_dict()
    for name in start:
        wanted = (0.75 * start[name].double() + 0.25 * end[name].double()).float()
        assert torch.equal(half[name], wanted), name
    # the two seeds give different weights, so the quarter point is neither end
    assert any(not torch.equal(half[name], start[name]) for name in start)
    assert any(not torch.equal(half[name], end[name]) for name in end)


def test_the_cli_writes_loadable_weights(tmp_path: Path, capsys) -> None:
    a, b = _exported(tmp_path, 0), _exported(tmp_path, 1)
    out = tmp_path / "new" / "mixed"
    assert trainer_main(["interpolate", str(a), str(b), "--weight", "0.5", "--out", str(out)]) == 0
    assert str(out / "model.safetensors") in capsys.readouterr().out
    loaded = load_weights(out).state_dict()
    expected = interpolate_weights(a, b, 0.5).state_dict()
    assert all(torch.equal(loaded[name], expected[name]) for name in expected)


def test_models_of_different_configurations_are_refused(tmp_path: Path, capsys) -> None:
    other = ModelConfig(embed_dim=32, num_heads=2, num_layers=1, ff_dim=32, max_features=5)
    a, b = _exported(tmp_path, 0), _exported(tmp_path, 1, other)
    out = tmp_path / "mixed"
    assert trainer_main(["interpolate", str(a), str(b), "--weight", "0.5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "different models" in err and "'embed_dim': 16" in err and "'embed_dim': 32" in err
    assert not out.exists()


@pytest.mark.parametrize("weight", [-0.1, 1.5])
def test_a_weight_outside_the_unit_interval_is_refused(tmp_path: Path, weight: float) -> None:
    a, b = _exported(tmp_path, 0), _exported(tmp_path, 1)
    with pytest.raises(ValueError, match=r"--weight must lie in \[0, 1\]"):
        interpolate_weights(a, b, weight)


def _file_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("out", ["first", "second", "first-file", "first-spelled-otherwise",
                                 "first-through-a-link"])
def test_an_out_that_is_an_input_is_refused_and_the_input_kept(tmp_path: Path, capsys,
                                                                out: str) -> None:
    """``--out A`` would replace model A with the mix: refused before anything is written,
    whatever spelling or link names A's files."""
    a, b = _exported(tmp_path, 0), _exported(tmp_path, 1)
    (tmp_path / "link").symlink_to(a)
    target = {"first": a, "second": b, "first-file": a / "model.safetensors",
              "first-spelled-otherwise": tmp_path / "sub" / ".." / a.name,
              "first-through-a-link": tmp_path / "link"}[out]
    (tmp_path / "sub").mkdir()
    before = _file_bytes(a), _file_bytes(b)
    assert trainer_main(["interpolate", str(a), str(b), "--weight", "0.5",
                         "--out", str(target)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "which this command reads" in lines[0], lines
    assert (_file_bytes(a), _file_bytes(b)) == before
