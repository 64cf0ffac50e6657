"""The prior's mechanisms that lost the prior study and were taken out (docs/recipe.md, tag
prior-study-2026-11): a stored config that names one at its old default (absent, null) loads
with its hash; any other value is refused in one line naming the key and the tag."""

from __future__ import annotations

import pytest
import yaml
from prior_gen_testlib import REPO, SMOKE, tiny_config

from prior_gen.config import generation_config_from_mapping, load_generation_config
from puicl_common.configio import ConfigError

# Config hashes computed before these keys existed, and while they existed (unchanged)
OLD_HASHES = {
    "smoke.yaml": "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
    "puicl_cpu.yaml": "3814e5b79d95bb13b593eb4d21d10072fff8adda67cb60c31989503f2fcccbca",
    "paper.yaml": "dce5954f9ecbcddbb856541e1c3acc08c75df7ad90f1149e71bd27a1b217783f",
}
# each retired key: (the sections on its way, its name)
RETIRED = [
    (("scm",), "families"),
    ((), "label_rule"),
    ((), "labeling"),
    ((), "label_noise"),
    (("dataset",), "columns"),
    (("dataset",), "wide"),
]


@pytest.mark.parametrize("name", sorted(OLD_HASHES))
def test_configs_keep_their_hash(name: str) -> None:
    assert load_generation_config(REPO / "configs" / name).hash() == OLD_HASHES[name]


def _set(data: dict, where: tuple[str, ...], key: str, value: object) -> dict:
    section = data["prior"]
    for name in where:
        section = section.setdefault(name, {})
    section[key] = value
    return data


def test_the_retired_keys_written_as_null_load_with_the_hash() -> None:
    data = yaml.safe_load(SMOKE.read_text())
    for where, key in RETIRED:
        _set(data, where, key, None)
    assert generation_config_from_mapping(data).hash() == OLD_HASHES["smoke.yaml"]


@pytest.mark.parametrize(("where", "key"), RETIRED)
def test_a_retired_key_set_is_refused_naming_the_key_and_the_tag(
    where: tuple[str, ...], key: str
) -> None:
    data = _set(yaml.safe_load(SMOKE.read_text()), where, key, {"probability": 0.5})
    with pytest.raises(ConfigError) as err:
        generation_config_from_mapping(data)
    message = str(err.value)
    assert message.startswith(".".join(("prior", *where, key)) + ": removed")
    assert "prior-study-2026-11" in message and "\n" not in message


def test_a_retired_key_set_in_a_test_config_is_refused_too() -> None:
    with pytest.raises(ConfigError, match=r"prior\.label_rule: removed"):
        tiny_config(prior={"label_rule": {}})


def test_the_retired_scope_codes_are_not_reused() -> None:
    from prior_gen.paper.seeding import SCOPE_CODES

    assert not set(SCOPE_CODES.values()) & set(range(4, 10))
    assert SCOPE_CODES["categorical"] == 3 and SCOPE_CODES["real_tables"] == 10
