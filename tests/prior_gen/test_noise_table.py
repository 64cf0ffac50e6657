"""The table noise sampler (``prior.scm.noise_sampler: table``) and the config versioning rule.

The rule: a key added after shards existed leaves the config hash alone while it holds its
legacy value. The hashes below were computed before the key existed (2026-11-21); shards and
checkpoints made with those configs must stay valid, so they must never change.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from prior_gen_testlib import PAPER, REPO, SMOKE, data_digest, shard_digests, tiny_config

from prior_gen.config import SCMConfig, generation_config_from_mapping, load_generation_config
from prior_gen.engine.forward import forward_group
from prior_gen.engine.noise_table import (
    TABLE_SIZE,
    normal_table,
    scaled_table,
    splitmix_words,
    table_noise,
)
from prior_gen.engine.portable import add_table_noise
from prior_gen.generate import generate_step, generate_tasks
from prior_gen.paper.factors import plan_step
from prior_gen.runner import run_generation
from puicl_common.configio import ConfigError, load_yaml

HASHES_BEFORE_THE_KEY = {
    SMOKE: "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
    REPO / "configs" / "study" / "a_small_model_small_tasks.yaml": (
        "d6caa48c2a347141e0a5973f04a2624288f16459d764594fe4f071e92e666dde"
    ),
}
# sha256 of normal_table().tobytes(): the table is part of what the table sampler's bytes mean
TABLE_SHA256 = "8babbcaf96568f10165a1eab530c0e5c92d04de96761b6dbb3dadfa94baba37f"


def _table_config(**sections):
    scm = {"noise_sampler": "table", **sections.pop("scm", {})}
    return tiny_config(prior={"scm": scm, **sections.pop("prior", {})}, **sections)


# -- the versioning rule ------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(HASHES_BEFORE_THE_KEY), ids=lambda p: p.name)
def test_configs_that_keep_the_legacy_sampler_keep_their_hash(path: Path) -> None:
    config = load_generation_config(path)
    assert config.prior.scm.noise_sampler == "box_muller"
    assert config.hash() == HASHES_BEFORE_THE_KEY[path]
    assert "noise_sampler" not in config.identity()["prior"]["scm"]


def test_the_legacy_value_written_out_or_left_out_gives_the_same_hash() -> None:
    data = load_yaml(SMOKE)
    data["prior"]["scm"].pop("noise_sampler", None)
    absent = generation_config_from_mapping(data)
    data["prior"]["scm"]["noise_sampler"] = "box_muller"
    explicit = generation_config_from_mapping(data)
    data["prior"]["scm"]["noise_sampler"] = "table"
    table = generation_config_from_mapping(data)
    assert absent.prior.scm.noise_sampler == "box_muller"  # no key: the legacy algorithm
    assert absent.hash() == explicit.hash() == HASHES_BEFORE_THE_KEY[SMOKE]
    assert table.hash() != absent.hash()
    assert table.identity()["prior"]["scm"]["noise_sampler"] == "table"
    assert SCMConfig.LEGACY_VALUES["noise_sampler"] == "box_muller"


def test_paper_config_uses_the_table_sampler() -> None:
    assert load_generation_config(PAPER).prior.scm.noise_sampler == "table"


def test_an_unknown_sampler_is_an_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior={"scm": {"noise_sampler": "ziggurat"}})
    assert "prior.scm.noise_sampler" in str(err.value) and "'table'" in str(err.value)


# -- the table ----------------------------------------------------------------------------------
def test_table_is_a_symmetric_unit_variance_normal_quantile_table() -> None:
    table = normal_table()
    assert table.dtype == np.float32 and table.shape == (TABLE_SIZE,)
    assert hashlib.sha256(table.tobytes()).hexdigest() == TABLE_SHA256
    assert np.all(np.diff(table) > 0) and np.array_equal(table, -table[::-1])
    values = table.astype(np.float64)
    assert abs(values.mean()) < 1e-12 and abs(values.var() - 1.0) < 1e-6
    assert 2.998 < np.mean(values**4) < 3.0  # normal kurtosis is 3; the cut tails lower it
    assert 4.32 < values.max() < 4.33  # Φ⁻¹(1 − 0.5 / 65536), rescaled
    # the median bins sit at the quantiles of their midpoints: Φ⁻¹(0.5 ± 0.5 / 65536)
    assert np.isclose(values[TABLE_SIZE // 2], 1.9124e-5, rtol=1e-3)
    scaled = scaled_table(0.01)
    assert np.array_equal(scaled, table * np.float32(0.01))
    assert not table.flags.writeable and not scaled.flags.writeable


def _splitmix64(seed: int, count: int) -> list[int]:
    """SplitMix64 (Steele, Lea & Flood 2014), written out independently of the module."""
    out, state, mask = [], seed, 2**64 - 1
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


def test_words_are_the_splitmix64_sequence() -> None:
    assert _splitmix64(0, 1) == [0xE220A8397B1DCDAF]  # the published first output for seed 0
    for seed in (0, 12345, 2**64 - 1):
        assert splitmix_words(seed, 5).tolist() == _splitmix64(seed, 5)


def test_noise_is_the_table_at_the_16_bit_slices_of_the_words_lowest_first() -> None:
    table = scaled_table(0.02)
    words = _splitmix64(99, 3)
    slices = [(w >> (16 * j)) & 0xFFFF for w in words for j in range(4)][:10]
    assert np.array_equal(table_noise(99, table, 10), table[slices])


@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 9, 1000, 65_537])
def test_compiled_kernel_gives_the_bytes_of_the_numpy_reference(count: int) -> None:
    table = scaled_table(0.01)
    for seed in (0, 7, 2**64 - 3):
        base = np.random.default_rng(count).standard_normal(count).astype(np.float32)
        kernel, reference = base.copy(), base + table_noise(seed, table, count)
        add_table_noise(kernel, table, np.uint64(seed))
        assert np.array_equal(kernel, reference)
        assert count == 0 or not np.array_equal(kernel, base)


def test_table_draws_have_normal_moments() -> None:
    draws = table_noise(3, normal_table(), 400_000).astype(np.float64)
    assert abs(draws.mean()) < 0.006  # 4 standard errors
    assert abs(draws.std() - 1.0) < 0.005
    assert abs(np.mean(np.abs(draws) > 1.0) - 0.3173) < 0.003
    assert abs(np.mean(np.abs(draws) > 2.0) - 0.0455) < 0.0015
    assert abs(np.mean(np.abs(draws) > 3.0) - 0.0027) < 0.0004
    # consecutive draws (slices of one word, and neighbouring words) are uncorrelated
    assert abs(np.corrcoef(draws[:-1], draws[1:])[0, 1]) < 0.006
    assert abs(np.corrcoef(draws[:-4], draws[4:])[0, 1]) < 0.006


# -- the table sampler inside the SCM -----------------------------------------------------------
def _noise_of_one_block(sampler: str, sigma: float) -> np.ndarray:
    """SCM outputs with noise σ minus the same SCMs without noise, divided by σ: the noise of
    the single hidden block (identity activation, causal tasks read that block's nodes)."""
    outputs = []
    for noise in (sigma, 0.0):
        config = tiny_config(
            prior={
                "scm": {
                    "depth": [2, 2],
                    "width": [12, 12],
                    "activations": ["identity"],
                    "noise_std": [noise],
                    "noise_sampler": sampler,
                },
                "dataset": {"n_features": [8, 8], "n_labeled": [200, 200]},
            },
            curriculum={"causal_final": 1.0, "global_batch": 8},
        )
        plans = plan_step(config, "train", 3, 0)  # stage K: every task is causal
        assert all(plan.causal for plan in plans)
        raws = forward_group(plans, config.prior.scm.init_std, sampler)
        outputs.append(np.concatenate([np.c_[raw.x, raw.score] for raw in raws]))
    return (outputs[0].astype(np.float64) - outputs[1]) / sigma


def test_the_scm_noise_from_the_table_has_the_requested_std() -> None:
    noise = _noise_of_one_block("table", 0.02).reshape(-1)
    assert noise.size > 20_000
    assert abs(noise.mean()) < 0.03 and abs(noise.std() - 1.0) < 0.03
    assert np.abs(noise).max() < 4.33 + 1e-3  # the table's largest value
    # the same SCMs, factors and streams with the Box–Muller: different noise, same law
    legacy = _noise_of_one_block("box_muller", 0.02).reshape(-1)
    assert legacy.shape == noise.shape and not np.allclose(legacy, noise)
    assert abs(legacy.std() - 1.0) < 0.03


def test_table_sampler_is_deterministic_and_a_task_does_not_depend_on_its_batch() -> None:
    config = _table_config(curriculum={"global_batch": 9})
    whole = generate_step(config, "train", 3, 2)
    assert data_digest(generate_step(config, "train", 3, 2)) == data_digest(whole)
    for i in (0, 5):
        alone = generate_tasks([plan_step(config, "train", 3, 2)[i]], config)
        assert data_digest(alone) == data_digest([whole[i]])
    legacy = generate_step(tiny_config(curriculum={"global_batch": 9}), "train", 3, 2)
    # the same factors and sizes; different data (only the noise differs)
    factors = ("seed_key", "n_generated", "n_labeled", "n_unlabeled", "pi", "eta", "causal")
    for new, old in zip(whole, legacy, strict=True):
        assert [new.meta[k] for k in factors] == [old.meta[k] for k in factors]
        assert new.x.shape == old.x.shape and not np.array_equal(new.x, old.x)


@pytest.mark.slow  # worker processes
def test_table_sampler_shards_are_the_same_for_any_worker_count(tmp_path: Path) -> None:
    config = _table_config()
    stages = [1, 3, "tail"]
    run_generation(config, "train", stages, tmp_path / "one", workers=1)
    run_generation(config, "train", stages, tmp_path / "two", workers=2, backend="loky")
    assert shard_digests(tmp_path / "one") == shard_digests(tmp_path / "two")
    assert len(shard_digests(tmp_path / "one")) == 6
