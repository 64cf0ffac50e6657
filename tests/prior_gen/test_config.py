"""Run-config loading: the paper's values, strict errors naming the key, the config hash."""

from __future__ import annotations

import dataclasses

import pytest
from prior_gen_testlib import PAPER, REPO, SMOKE, tiny_config

from prior_gen.config import KNOWN_SECTIONS, generation_config_from_mapping, load_generation_config
from puicl_common.configio import ConfigError, load_yaml


def test_paper_config_holds_the_papers_values() -> None:
    config = load_generation_config(PAPER)
    c, scm = config.curriculum, config.prior.scm
    assert (c.stages, c.steps_per_stage, c.tail_steps, c.global_batch) == (100, 750, 25_000, 48)
    assert c.phase1_steps == 75_000 and c.total_steps == 100_000
    assert (c.eta.start, c.eta.end) == ((1.0, 1.0), (0.5, 2.0))
    assert (c.pi.start, c.pi.end) == ((0.5, 0.5), (0.1, 0.9))
    assert c.causal_final == 0.5
    assert (scm.depth, scm.width, scm.n_causes, scm.init_std) == ((4, 12), (12, 36), 20, 0.8)
    assert scm.noise_std == (0.005, 0.01, 0.02) and len(scm.activations) == 10
    assert config.prior.dataset.n_features == (5, 20)
    assert config.prior.dataset.n_labeled == (100, 300)
    scopes = config.prior.scopes
    assert (scopes.depth, scopes.width) == ("stage", "stage")
    assert (scopes.n_features, scopes.n_labeled, scopes.noise_std) == ("step", "step", "step")
    assert (scopes.causal, scopes.eta, scopes.pi) == ("task", "task", "task")


def test_config_files_only_use_known_sections() -> None:
    for path in sorted((REPO / "configs").glob("*.yaml")):
        assert set(load_yaml(path)) <= set(KNOWN_SECTIONS), path


def _load(data: dict) -> None:
    generation_config_from_mapping(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"priors": {}}, "priors: unknown top-level section (allowed: seed, prior, curriculum"),
        ({"prior": {"scm": {"init_sd": 1}}}, "prior.scm.init_sd: unknown key"),
        ({"prior": {"scm": {"init_std": -1}}}, "prior.scm.init_std: must be positive, got -1.0"),
        ({"prior": {"scm": {"depth": [5, 4]}}}, "prior.scm.depth: lower bound 5 is above upper"),
        ({"prior": {"scm": {"activations": ["tanh", "swish"]}}}, "unknown activation 'swish'"),
        ({"prior": {"scopes": {"eta": "epoch"}}}, "prior.scopes.eta: must be one of 'stage'"),
        ({"prior": {"modes": {"label_block": []}}}, "prior.modes.label_block: needs at least one"),
        ({"curriculum": {"pi": {"start": [0.5, 0.5], "end": [0.1, 1.0]}}}, "curriculum.pi: bounds"),
        ({"curriculum": {"global_batch": 0}}, "curriculum.global_batch: must be >= 1, got 0"),
        ({"shards": {"format": "parquet"}}, "shards.format: must be one of 'zarr', 'webdataset'"),
        ({"seed": -3}, "seed: must lie in 0..2**63-1, got -3"),
        (
            {"prior": {"scm": {"depth": [2, 4], "width": [4, 8]}}},
            "prior.scm.depth: the smallest SCM (2 layers × width 4 = 4 hidden nodes) cannot hold",
        ),
        # sizes that would ask for terabytes and end in memory errors
        ({"prior": {"scm": {"depth": [4, 10**6]}}}, "prior.scm.depth: upper bound must be <= 64"),
        ({"prior": {"scm": {"width": [12, 10**6]}}},
         "prior.scm.width: upper bound must be <= 1,024"),
        ({"prior": {"scm": {"n_causes": 10**7}}}, "prior.scm.n_causes: must be <= 1,024"),
        ({"prior": {"dataset": {"n_labeled": [100, 10**8]}}},
         "prior.dataset.n_labeled: upper bound must be <= 10,000"),
        ({"prior": {"dataset": {"n_labeled": {"start": [10, 20], "end": [10, 10**8]}}}},
         "prior.dataset.n_labeled: bounds must lie in 1..10,000"),
        ({"curriculum": {"eta": {"start": [1.0, 1.0], "end": [0.5, 1e9]}}},
         "curriculum.eta: bounds must lie in (0, 100]"),
    ],
)
def test_bad_values_are_errors_naming_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(data)
    assert message in str(err.value)


def test_other_parts_sections_are_allowed_but_not_validated_here() -> None:
    config = generation_config_from_mapping(
        {"model": {"anything": 1}, "training": {"x": [1]}, "validation": None}
    )
    assert config.curriculum.stages == 100


def test_hash_covers_seed_prior_curriculum_but_not_storage() -> None:
    base = tiny_config()
    assert base.hash() == tiny_config().hash()
    assert base.with_seed(1).hash() != base.hash()
    assert tiny_config(curriculum={"global_batch": 4}).hash() != base.hash()
    assert tiny_config(prior={"scopes": {"eta": "step"}}).hash() != base.hash()
    stored = dataclasses.replace(base, shards=dataclasses.replace(base.shards, format="webdataset"))
    assert stored.hash() == base.hash()


def test_smoke_config_is_small() -> None:
    config = load_generation_config(SMOKE)
    c = config.curriculum
    assert c.stages * c.steps_per_stage * c.global_batch <= 200
    assert config.prior.dataset.n_labeled[1] <= 32
