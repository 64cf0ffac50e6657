"""Wider tables (prior.dataset.wide, prior_gen.wide): off by default and out of the config hash,
the draw as specified from the task's own stream, causal SCMs widened to hold the features,
the other tasks unchanged, and the same bytes for any worker count and CPU kernel choice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from prior_gen_testlib import REPO, SMOKE, digests_under_cpu_variant, shard_digests, tiny_config
from test_portable_golden import VARIANTS

from prior_gen.config import LEGACY_VALUES, generation_config_from_mapping, load_generation_config
from prior_gen.factors import plan_step
from prior_gen.generate import generate_step
from prior_gen.runner import run_generation
from prior_gen.seeding import task_stream
from prior_gen.wide import causal_width
from puicl_common.configio import ConfigError

# Config hashes computed before the key existed (the same values test_mechanisms.py pins)
OLD_HASHES = {
    "smoke.yaml": "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
    "puicl_cpu.yaml": "3814e5b79d95bb13b593eb4d21d10072fff8adda67cb60c31989503f2fcccbca",
    "paper.yaml": "dce5954f9ecbcddbb856541e1c3acc08c75df7ad90f1149e71bd27a1b217783f",
}
WIDE = {"probability": 0.5, "n_features": [20, 40]}
STEPS = [(stage, step) for stage in (1, 2, 3, "tail") for step in range(4)]
PORTABLE = {"noise_sampler": "table", "arithmetic": "portable"}


def _tasks(config):
    return [t for stage, step in STEPS for t in generate_step(config, "train", stage, step)]


def _wide(wide=WIDE, **prior):
    return tiny_config(prior={"dataset": {"wide": wide}, **prior})


@pytest.mark.parametrize("name", sorted(OLD_HASHES))
def test_configs_without_the_key_keep_their_hash(name: str) -> None:
    config = load_generation_config(REPO / "configs" / name)
    assert config.prior.dataset.wide is None
    assert config.hash() == OLD_HASHES[name]
    assert LEGACY_VALUES[("prior", "dataset", "wide")] is None


def test_null_keeps_the_hash_and_a_section_enters_it_with_its_defaults() -> None:
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["dataset"]["wide"] = None
    assert generation_config_from_mapping(data).hash() == OLD_HASHES["smoke.yaml"]
    defaults = _wide({})
    assert defaults.identity()["prior"]["dataset"]["wide"] == {
        "probability": 0.2,
        "n_features": [20, 100],
    }
    hashes = {OLD_HASHES["smoke.yaml"], defaults.hash(), _wide().hash()}
    assert len(hashes) == 3


@pytest.mark.parametrize(
    ("wide", "message"),
    [
        ({"probability": 1.5}, "prior.dataset.wide.probability: must lie in [0, 1], got 1.5"),
        ({"n_features": [40, 30]}, "prior.dataset.wide.n_features: lower bound 40 is above"),
        ({"n_features": [0, 30]}, "prior.dataset.wide.n_features: lower bound must be >= 1"),
        ({"share": 0.2}, "prior.dataset.wide.share: unknown key"),
    ],
)
def test_bad_settings_are_errors_naming_the_key(wide: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _wide(wide)
    assert message in str(err.value)


def _same_arrays(a, b) -> bool:
    return np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y) and a.n_labeled == b.n_labeled


def test_without_the_section_tasks_are_as_before_and_narrow_tasks_keep_their_bytes() -> None:
    legacy = _tasks(tiny_config())
    assert all("wide" not in task.meta for task in legacy)
    # probability 0: every task is the legacy task, its metadata gains only "wide": false
    never = _tasks(_wide({"probability": 0.0}))
    for old, new in zip(legacy, never, strict=True):
        assert _same_arrays(old, new)
        assert new.meta == {**old.meta, "wide": False}
    # probability 0.5: the tasks that stay narrow are the legacy tasks, byte for byte
    mixed = _tasks(_wide())
    narrow = [(old, new) for old, new in zip(legacy, mixed, strict=True) if not new.meta["wide"]]
    assert 0 < len(narrow) < len(legacy)
    for old, new in narrow:
        assert _same_arrays(old, new)


@pytest.mark.parametrize("scm", [{}, PORTABLE], ids=["native", "portable"])
def test_the_draw_follows_the_task_stream_and_the_sizes_fit(scm: dict) -> None:
    config = _wide(scm=scm)
    lo, hi = WIDE["n_features"]
    usual_lo, usual_hi = config.prior.dataset.n_features
    wide_widths, widened, wide_causes = set(), 0, 0
    for stage, step in STEPS:
        drawn_width = plan_step(tiny_config(), "train", stage, step)[0].width  # stage-scoped
        for task in generate_step(config, "train", stage, step):
            u_wide, u_count = task_stream(task.meta["seed_key"], "wide").random(2)
            d = task.n_features  # the stored matrix's columns
            assert d == task.meta["n_features"] and np.isfinite(task.x).all()
            assert task.meta["wide"] == bool(u_wide < WIDE["probability"])
            if not task.meta["wide"]:
                assert usual_lo <= d <= usual_hi and task.meta["width"] == drawn_width
                continue
            assert d == lo + int(u_count * (hi - lo + 1))
            wide_widths.add(d)
            depth, width = task.meta["depth"], task.meta["width"]
            if task.meta["causal"]:
                assert width == causal_width(drawn_width, depth, d) >= drawn_width
                assert (depth - 1) * width >= d + 1  # label and features: distinct nodes
                if width > drawn_width:  # widened: to the least width that holds them
                    assert (depth - 1) * (width - 1) < d + 1
                    widened += 1
                assert task.meta["label_node"] < (depth - 1) * width
            else:
                assert width == drawn_width
                if task.meta["noncausal_features"] == "causes":
                    assert task.meta["n_causes"] == d
                    wide_causes += 1
    assert min(wide_widths) >= lo and max(wide_widths) <= hi and len(wide_widths) > 5
    assert widened > 0 and wide_causes > 0


@pytest.mark.slow  # a worker pool
def test_two_workers_give_the_same_bytes(tmp_path: Path) -> None:
    config = _wide()
    stages = [1, 3, "tail"]
    run_generation(config, "train", stages, tmp_path / "one", workers=1)
    run_generation(config, "train", stages, tmp_path / "two", workers=2)
    assert shard_digests(tmp_path / "one") == shard_digests(tmp_path / "two")
    assert len(shard_digests(tmp_path / "one")) == 6


@pytest.mark.slow  # a subprocess
@pytest.mark.parametrize("variant", [v for v in ("openblas-prescott",) if v in VARIANTS])
def test_other_cpu_kernels_give_the_same_bytes(tmp_path: Path, variant: str) -> None:
    """Portable arithmetic with wide tasks and widened causal SCMs (node families on, so that
    both portable forward passes run): the same shards under OpenBLAS's SSE3 kernels."""
    families = {"weights": {"mlp": 1, "tree": 1, "linear": 1}}
    config = _wide(scm={**PORTABLE, "families": families})
    run_generation(config, "train", [1, "tail"], tmp_path / "here", workers=1)
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"].update(PORTABLE, families=families)
    data["prior"]["dataset"]["wide"] = WIDE
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(data))
    assert generation_config_from_mapping(data).hash() == config.hash()
    there = digests_under_cpu_variant(path, tmp_path / "there", VARIANTS[variant])
    assert there == shard_digests(tmp_path / "here")
