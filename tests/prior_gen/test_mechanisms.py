"""The prior's optional mechanisms together (prior.scm.families, prior.label_rule,
prior.dataset.columns, prior.labeling, prior.label_noise): off by default and out of the config
hash, strict validation naming the key, and the same bytes for any worker count and CPU kernel
choice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prior_gen_testlib import REPO, SMOKE, digests_under_cpu_variant, shard_digests, tiny_config
from test_portable_golden import VARIANTS  # the CPU kernel variants of the golden digest

from prior_gen.config import LEGACY_VALUES, generation_config_from_mapping, load_generation_config
from prior_gen.runner import run_generation
from puicl_common.configio import ConfigError

# Config hashes computed before these keys existed (as in test_categorical.py)
OLD_HASHES = {
    "smoke.yaml": "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
    "puicl_cpu.yaml": "3814e5b79d95bb13b593eb4d21d10072fff8adda67cb60c31989503f2fcccbca",
    "paper.yaml": "dce5954f9ecbcddbb856541e1c3acc08c75df7ad90f1149e71bd27a1b217783f",
}
KEYS = (("prior", "scm", "families"), ("prior", "label_rule"), ("prior", "dataset", "columns"),
        ("prior", "labeling"), ("prior", "label_noise"), ("prior", "real_tables"))
ALL_ON = {
    "scm": {
        "noise_sampler": "table",
        "arithmetic": "portable",
        "families": {"weights": {"mlp": 2, "tree": 1, "threshold": 1, "product": 1, "linear": 1}},
    },
    "label_rule": {"probability": 0.5},
    "labeling": {"probability": 0.5},
    "label_noise": {"probability": 0.5},
    "dataset": {"columns": {"max_columns": 2}, "categorical": {"share": [0.0, 0.3]}},
}


@pytest.mark.parametrize("name", sorted(OLD_HASHES))
def test_configs_without_the_new_keys_keep_their_hash(name: str) -> None:
    config = load_generation_config(REPO / "configs" / name)
    assert config.hash() == OLD_HASHES[name]
    assert config.prior.scm.families is None and config.prior.label_rule is None
    assert config.prior.dataset.columns is None
    for key in KEYS:
        assert LEGACY_VALUES[key] is None


def test_the_keys_written_as_null_keep_the_hash_and_enter_it_when_set() -> None:
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"]["families"] = None
    data["prior"]["label_rule"] = None
    data["prior"]["dataset"]["columns"] = None
    assert generation_config_from_mapping(data).hash() == OLD_HASHES["smoke.yaml"]
    hashes = {OLD_HASHES["smoke.yaml"]}
    for section, value in (("label_rule", {}), ("dataset", {"columns": {}})):
        on = tiny_config(prior={section: value})
        hashes.add(on.hash())
    portable = {"noise_sampler": "table", "arithmetic": "portable"}
    hashes.add(tiny_config(prior={"scm": portable}).hash())
    families = tiny_config(prior={"scm": {**portable, "families": {}}})
    hashes.add(families.hash())
    assert families.identity()["prior"]["scm"]["families"]["weights"] == {"mlp": 1.0}
    assert len(hashes) == 5


PORTABLE = {"noise_sampler": "table", "arithmetic": "portable"}


@pytest.mark.parametrize(
    ("prior", "message"),
    [
        (
            {"scm": {**PORTABLE, "families": {"weights": {"mlp": 1, "forest": 1}}}},
            "prior.scm.families.weights.forest: unknown family 'forest' (known: linear, mlp, "
            "product, threshold, tree)",
        ),
        (
            {"scm": {**PORTABLE, "families": {"weights": {"tree": -1}}}},
            "prior.scm.families.weights.tree: must be a finite number >= 0, got -1.0",
        ),
        (
            {"scm": {**PORTABLE, "families": {"weights": {"tree": 0}}}},
            "prior.scm.families.weights: needs a positive weight",
        ),
        (
            {"scm": {**PORTABLE, "families": {"scope": "block"}}},
            "prior.scm.families.scope: must be one of 'node', 'task'",
        ),
        (
            {"scm": {**PORTABLE, "families": {"tree_depth": [3, 2]}}},
            "prior.scm.families.tree_depth: lower bound 3 is above upper bound 2",
        ),
        (
            {"scm": {"families": {"weights": {"tree": 1}}}},
            "prior.scm.families: the function families run in the portable arithmetic",
        ),
        ({"label_rule": {"probability": 1.5}}, "prior.label_rule.probability: must lie in [0, 1]"),
        ({"label_rule": {"levels": [1, 3]}}, "prior.label_rule.levels: lower bound must be >= 2"),
        ({"label_rule": {"rules": 3}}, "prior.label_rule.rules: unknown key"),
        (
            {"dataset": {"columns": {"integer": -0.1}}},
            "prior.dataset.columns.integer: must lie in [0, 1]",
        ),
        ({"dataset": {"columns": {"max_columns": 0}}}, "prior.dataset.columns.max_columns: must"),
        ({"dataset": {"columns": {"dupes": 0.1}}}, "prior.dataset.columns.dupes: unknown key"),
    ],
)
def test_bad_settings_are_errors_naming_the_key(prior: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior=prior)
    assert message in str(err.value)


def _all_on():
    return tiny_config(prior=ALL_ON)


@pytest.mark.slow  # a worker pool
def test_two_workers_give_the_same_bytes_with_every_mechanism_on(tmp_path: Path) -> None:
    config = _all_on()
    stages = [1, 3, "tail"]
    run_generation(config, "train", stages, tmp_path / "one", workers=1)
    run_generation(config, "train", stages, tmp_path / "two", workers=2)
    assert shard_digests(tmp_path / "one") == shard_digests(tmp_path / "two")
    assert len(shard_digests(tmp_path / "one")) == 6


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize(
    "variant", [v for v in ("openblas-prescott", "numpy-baseline") if v in VARIANTS]
)
def test_other_cpu_kernels_give_the_same_bytes_with_every_mechanism_on(
    tmp_path: Path, variant: str
) -> None:
    """The same command under OpenBLAS's SSE3 kernels or numpy's masked SIMD kernels writes
    the same shards as this process (the mechanisms use no BLAS and no numpy transcendental)."""
    config = _all_on()
    run_generation(config, "train", [1, "tail"], tmp_path / "here", workers=1)
    data = yaml.safe_load(SMOKE.read_text())
    for section, value in ALL_ON.items():
        data["prior"].setdefault(section, {})
        if isinstance(value, dict) and section != "label_rule":
            data["prior"][section].update(value)
        else:
            data["prior"][section] = value
    path = tmp_path / "all_on.yaml"
    path.write_text(yaml.safe_dump(data))
    assert generation_config_from_mapping(data).hash() == config.hash()
    there = digests_under_cpu_variant(path, tmp_path / "there", VARIANTS[variant])
    assert there == shard_digests(tmp_path / "here")
