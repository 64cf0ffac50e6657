"""Strict YAML -> dataclass loading: every error names the offending key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from puicl_common.configio import (
    ConfigError,
    config_hash,
    from_mapping,
    load_yaml,
    require,
    to_dict,
)
from puicl_model.config import ModelConfig


@dataclass(frozen=True)
class Inner:
    lr: float = 1e-3
    kind: Literal["a", "b"] = "a"
    sizes: tuple[int, int] = (1, 2)

    def validate(self) -> None:
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner = field(default_factory=Inner)
    steps: int = 10
    tags: list[str] = field(default_factory=list)
    limit: int | None = None


def test_defaults_and_nested_values() -> None:
    cfg = from_mapping(Outer, {"name": "x", "inner": {"lr": "1e-4", "sizes": [3, 4]}})
    assert cfg.inner.lr == pytest.approx(1e-4)  # YAML 1.1 reads 1e-4 as a string
    assert cfg.inner.sizes == (3, 4)
    assert cfg.steps == 10 and cfg.limit is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "stpes": 3}, "stpes: unknown key (allowed here: inner, limit, name"),
        ({"name": "x", "inner": {"lrr": 1}}, "inner.lrr: unknown key"),
        ({}, "name: missing required key"),
        ({"name": "x", "steps": "ten"}, "steps: expected an integer, got 'ten'"),
        ({"name": "x", "steps": True}, "steps: expected an integer, got True"),
        ({"name": "x", "inner": {"lr": -1}}, "inner.lr: must be positive, got -1.0"),
        ({"name": "x", "inner": {"kind": "c"}}, "inner.kind: must be one of 'a', 'b', got 'c'"),
        ({"name": "x", "inner": {"sizes": [1]}}, "inner.sizes: expected a list of 2 values"),
        ({"name": "x", "tags": ["a", 3]}, "tags[1]: expected a string, got 3"),
        ({"name": "x", "inner": 5}, "inner: expected a mapping"),
    ],
)
def test_errors_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(Outer, data)
    assert message in str(err.value)


def test_hash_is_canonical_and_sensitive() -> None:
    a = from_mapping(Outer, {"name": "x", "inner": {"lr": 0.5}})
    b = from_mapping(Outer, {"inner": {"lr": 0.5}, "name": "x"})
    c = from_mapping(Outer, {"name": "x", "inner": {"lr": 0.25}})
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(c)
    assert to_dict(a)["inner"]["sizes"] == [1, 2]


def test_model_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_heads: must divide embed_dim"):
        from_mapping(ModelConfig, {"embed_dim": 100, "num_heads": 8})
    assert from_mapping(ModelConfig, {}) == ModelConfig()


def test_load_yaml_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(scalar)
