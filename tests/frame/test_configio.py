"""Strict YAML -> dataclass loading: every error names the offending key."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from puicl_common.configio import (
    ConfigError,
    config_hash,
    from_mapping,
    load_yaml,
    merge_mappings,
    require,
    to_dict,
)
from puicl_model.net.config import ModelConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


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
    with pytest.raises(ConfigError, match="is not valid YAML") as caught:
        load_yaml(bad)
    # one line that places the problem in the file, not in "<unicode string>"
    message = str(caught.value)
    assert "\n" not in message and "unicode string" not in message
    assert str(bad) in message and "at line 2, column 1" in message
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(scalar)


# ---------------------------------------------------------------------------- extends ------
def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_merge_rule_mappings_merge_everything_else_replaces() -> None:
    base = {"a": {"x": 1, "y": [1, 2], "deep": {"p": 1, "q": 2}}, "b": [1, 2], "c": {"k": 1}}
    over = {"a": {"y": [3], "deep": {"q": 5}, "z": None}, "b": [9], "c": 4, "d": {"new": 1}}
    merged = merge_mappings(base, over)
    assert merged == {
        "a": {"x": 1, "y": [3], "deep": {"p": 1, "q": 5}, "z": None},  # lists replace
        "b": [9],
        "c": 4,  # a scalar replaces a mapping
        "d": {"new": 1},
    }
    assert merge_mappings({"a": [1]}, {"a": {"start": 1}}) == {"a": {"start": 1}}
    assert merge_mappings({"a": {"x": 1}}, {"a": None}) == {"a": None}  # null is a value
    assert base["a"]["deep"] == {"p": 1, "q": 2} and over["d"] == {"new": 1}  # untouched
    merged["a"]["deep"]["p"] = 99
    assert base["a"]["deep"]["p"] == 1  # no shared nested objects


def test_extends_is_resolved_recursively_relative_to_each_file(tmp_path) -> None:
    _write(tmp_path / "root.yaml", "seed: 0\nmodel: {embed_dim: 64, num_layers: 4}\n")
    _write(tmp_path / "mid" / "mid.yaml", """\
        extends: ../root.yaml
        model: {num_layers: 6}
        training: {log_every: 5}
    """)
    leaf = _write(tmp_path / "mid" / "leaf.yaml", """\
        extends: mid.yaml
        seed: 1
        training: {log_every: 7}
    """)
    assert load_yaml(leaf) == {
        "seed": 1,
        "model": {"embed_dim": 64, "num_layers": 6},
        "training": {"log_every": 7},
    }


def test_an_extends_cycle_is_refused_naming_the_files(tmp_path) -> None:
    a = _write(tmp_path / "a.yaml", "extends: b.yaml\nseed: 1\n")
    _write(tmp_path / "b.yaml", "extends: a.yaml\nseed: 2\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(a)
    message = str(err.value)
    assert message == f"extends: cycle of extends: {a} -> {tmp_path / 'b.yaml'} -> {a}"
    assert "\n" not in message
    itself = _write(tmp_path / "self.yaml", "extends: self.yaml\n")
    with pytest.raises(ConfigError, match=r"cycle of extends: .*self\.yaml -> .*self\.yaml$"):
        load_yaml(itself)


def test_a_missing_base_is_named_with_the_file_extending_it(tmp_path) -> None:
    child = _write(tmp_path / "child.yaml", "extends: nowhere/base.yaml\nseed: 1\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(child)
    message = str(err.value)
    assert message == (
        f"extends: base config file not found: {tmp_path / 'nowhere' / 'base.yaml'} "
        f"(extended by {child})"
    )
    assert "\n" not in message


@pytest.mark.parametrize(
    ("base_text", "message"),
    [
        ("- 1\n- 2\n", "must hold a mapping at the top level, got [1, 2]"),
        ("3\n", "must hold a mapping at the top level, got 3"),
    ],
)
def test_a_base_that_is_not_a_mapping_is_refused(tmp_path, base_text: str, message: str) -> None:
    _write(tmp_path / "base.yaml", base_text)
    child = _write(tmp_path / "child.yaml", "extends: base.yaml\nseed: 1\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(child)
    assert str(err.value) == (
        f"extends: {tmp_path / 'base.yaml'} (extended by {child}) {message}"
    )


@pytest.mark.parametrize("value", ["[a.yaml]", "null", "3", "''"])
def test_extends_must_name_a_file(tmp_path, value: str) -> None:
    child = _write(tmp_path / "child.yaml", f"extends: {value}\nseed: 1\n")
    with pytest.raises(ConfigError, match=r"^extends: expected the path of a base config file"):
        load_yaml(child)


def test_an_empty_base_adds_nothing(tmp_path) -> None:
    _write(tmp_path / "empty.yaml", "# nothing yet\n")
    child = _write(tmp_path / "child.yaml", "extends: empty.yaml\nseed: 1\n")
    assert load_yaml(child) == {"seed": 1}


# The generation hash (prior_gen) and training hash (trainer) of every stored config, computed
# from the full-copy files before they were rewritten as a base plus their differences: the
# rewrite changed no run's identity (the committed run states under checkpoints/*-run/ store
# these hashes). smoke.yaml's and paper.yaml's training hashes changed once since, when they
# took the unit step (training.gradient_sum: units; docs/decisions.md): no run of either is
# stored.
CONFIG_HASHES = {
    "paper.yaml": (
        "dce5954f9ecbcddbb856541e1c3acc08c75df7ad90f1149e71bd27a1b217783f",
        "8bd4c16153d6d7a088c48de463f2beb382e823bafb2ddf8f3c2f8be30ba63167",
    ),
    "puicl_cpu.yaml": (
        "3814e5b79d95bb13b593eb4d21d10072fff8adda67cb60c31989503f2fcccbca",
        "5b7f5fbea69fe67edcb8147b0d03507ba16cfd9ee68b584f7c532c2cfd75e0bd",
    ),
    "puicl_paper_model_cpu.yaml": (
        "d749f044918c5fe7339a4b0c743f6df1dfdc5364bbda5df0fb704c39f6fb2404",
        "6f2e023d91211202cf9fe08408bc3945c3d63cfdac8413856422f414cf024c93",
    ),
    "puicl_v1.yaml": (
        "8e7260f0ed369b8cd3c7c24a3a6772688f12622b98b2eec89e2278d090c5deb4",
        "35fd5323354a3e9dd3e66ed88becefd71f64c195eff1fc41d3516cf706be703e",
    ),
    "puicl_v1_ft.yaml": (
        "98859f90df35f4a2316da5ac630dc74cb7fed5ce53db4f9f2801ebb0bcb6816a",
        "a888fb219cb891d4d06c8daafff010ff0be2dadcf93a373284f3519fb0759e09",
    ),
    "puicl_v1_ft_mixed.yaml": (
        "5be3c0aff8e23381cfd946a900f127830274066a0fe47e8341f96b831d7ef2a4",
        "a755b7e498d5f5f176d9abd034e2709bf296ec93f52bc3ba098f2526e70e49a9",
    ),
    "puicl_v1_ft_sizes.yaml": (
        "cb522c155b466e046ff4d72f0c5ae2b976c6d13cdda4e880e9ba5cc72fa3021f",
        "636bb50f7b5843d06db9096a2dec590469e2e538b67fa1d752a60bdff9ab5b7b",
    ),
    "puicl_v11_ft_large.yaml": (
        "de7a6b60aa5559aeca33f522861ada91c13c949ff904485c5f0a90a6290f6f84",
        "4982f6650bddce841c34d95730d8672a39e44321f8929e99e2ce06382708e78a",
    ),
    "prior_study/continued/control.yaml": (
        "7229921bf2f727928d9742049dfa272afb473d14237c5a098648bad67b5e877e",
        "1abcd5ecfe23bf1cc2c41ad528905095aa69c4b62c80da99ddf3028f18c7d09f",
    ),
    "prior_study/continued/real_tables.yaml": (
        "0f099b88adcaa28fc99a8b88c0ff45051b4eca6bc9dabe307f1803b1b16c7152",
        "a63bf5abf7a1d20cd029907e17f80b24968ecc952b0bc648322466d2829d4250",
    ),
    "recipe_v1_draft.yaml": (
        "5b7115b81edabd350b6f106857785a31225587af2388a11e0f9272bfca8f20d6",
        "ebe7d1cd68052d0207ccdc8668979ed11c7cd3ebcc8608715005f0714ac1f2a1",
    ),
    "smoke.yaml": (
        "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9",
        "d694adde5b12f6f7816f754ffe9508e906e6b4e51fc731010a51fa39c86de05d",
    ),
    "study/a_small_model_small_tasks.yaml": (
        "d6caa48c2a347141e0a5973f04a2624288f16459d764594fe4f071e92e666dde",
        "e04172bd2855278acb5e5bb69a46c029cdf6f66a19afd1a1197f174d1dce5f50",
    ),
    "study/b_small_model_paper_tasks.yaml": (
        "539a4fe86e30242e6e45cc038dc7368f584f9417fd95631363fdb2b59a0c0edc",
        "8d705c01a3a8284a650eb49a2e61e39dc7a26b3cae10fd7d89ed050e1d74bf58",
    ),
    "study/c_paper_model_small_tasks.yaml": (
        "1bc9c8925f5817ae348ee838ec90885a85b245beaee256fda0edaae2387386e2",
        "041f3c0a9db0ab30fdd5ca8801c4a5c14230d038e63403ca04ffeab263b8e123",
    ),
}


def _stored_configs() -> list[str]:
    names = [p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*.yaml")]
    return sorted(n for n in names if not n.endswith("plan.yaml"))  # study plans: not configs


def test_every_stored_config_has_pinned_hashes() -> None:
    assert _stored_configs() == sorted(CONFIG_HASHES)


@pytest.mark.parametrize("name", sorted(CONFIG_HASHES))
def test_resolved_configs_keep_their_hashes(name: str, monkeypatch) -> None:
    from trainer.config import load_run_config

    monkeypatch.chdir(CONFIGS.parent)  # training.init_weights paths are relative to the root
    config = load_run_config(CONFIGS / name)
    assert (config.generation().hash(), config.training_hash()) == CONFIG_HASHES[name]


BOMB = """a: &a [x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
seed: [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)  # 9**9 leaves as text: ~3 GB once printed or hashed
    with pytest.raises(ConfigError, match=r"expands to more than 100000 values"):
        load_yaml(path)
    # a chain of aliases that each double the one before: few aliases, 2**40 values
    chain = "l0: &l0 [x, x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]\n"
                                         for i in range(1, 41))
    path.write_text(chain)
    with pytest.raises(ConfigError, match=r"expands to more than 100000 values"):
        load_yaml(path)
    path.write_text("a: &a [1, *a]\n")  # a value that contains itself
    with pytest.raises(ConfigError, match=r"contains itself \(\*a\)"):
        load_yaml(path)


def test_a_few_aliases_still_load_and_errors_show_values_briefly(tmp_path) -> None:
    path = tmp_path / "few.yaml"
    path.write_text("base: &b {n_features: 3}\nother: *b\n")
    assert load_yaml(path) == {"base": {"n_features": 3}, "other": {"n_features": 3}}
    huge: list = [0] * 10
    for _ in range(11):  # 10**12 leaves, shared as aliases build them: no repr could print it
        huge = [huge] * 10
    with pytest.raises(ConfigError) as caught:
        from_mapping(ModelConfig, {"embed_dim": huge}, "model")
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize("content, message", [
    ("a:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(100)) + "  " * 101 + "v: 1\n",
     "nests values deeper than 64 levels"),
    ("x: " + "[" * 1000 + "]" * 1000 + "\n", "nests values deeper than 64 levels"),
])
def test_deep_nesting_is_refused_in_one_line(tmp_path, content, message) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_yaml(path)


def test_extends_reads_only_small_regular_files_and_short_chains(tmp_path) -> None:
    top = tmp_path / "top.yaml"
    top.write_text("extends: /dev/zero\nseed: 1\n")
    with pytest.raises(ConfigError, match=r"/dev/zero \(extended by .*top.yaml\) is not a "
                                          r"regular file"):
        load_yaml(top)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    top.write_text("extends: big.yaml\n")
    with pytest.raises(ConfigError, match=r"is larger than 1048576 bytes"):
        load_yaml(top)
    for i in range(40):  # c0 extends c1 extends ... c40
        (tmp_path / f"c{i}.yaml").write_text(f"extends: c{i + 1}.yaml\n")
    (tmp_path / "c40.yaml").write_text("seed: 2\n")
    with pytest.raises(ConfigError, match=r"extends more than 32 files in a chain"):
        load_yaml(tmp_path / "c0.yaml")
    (tmp_path / "c20.yaml").write_text("seed: 3\n")  # a chain of 21 files loads
    assert load_yaml(tmp_path / "c0.yaml") == {"seed": 3}


@pytest.mark.parametrize("content, key, lines", [
    ("seed: 0\ncurriculum: {stages: 1}\nprior: {}\ncurriculum: {stages: 2}\n", "'curriculum'",
     "lines 2 and 4"),
    ("prior:\n  scm:\n    width: [1, 2]\n    width: [3, 4]\n", "'width'", "lines 3 and 4"),
    ("base: &b {a: 1}\nother:\n  <<: *b\n  b: 2\n  b: 3\n", "'b'", "lines 4 and 5"),
    ("curriculum: {global_batch: 8, global_batch: 16}\n", "'global_batch'",
     "line 1, columns 14 and 31"),
    ("seed: 0\nprior: {scm: {width: [1, 2], depth: [2, 3], width: [3, 4]}}\n", "'width'",
     "line 2, columns 15 and 45"),
], ids=["a-section", "a-nested-key", "after-a-merge", "one-flow-mapping",
        "a-nested-flow-mapping"])
def test_a_key_set_twice_is_refused_naming_it_and_the_file(tmp_path, content, key,
                                                           lines) -> None:
    """YAML forbids a repeated key; PyYAML would keep the last value, so that a second
    ``curriculum:`` section replaced the first without a word."""
    path = tmp_path / "twice.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_yaml(path)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert f"{path} sets the key {key} twice in one mapping ({lines})" in message


def test_a_merge_may_still_be_overridden_key_by_key(tmp_path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\n")
    assert load_yaml(path) == {"base": {"a": 1, "b": 2}, "other": {"a": 1, "b": 3}}


def test_many_plain_values_are_not_called_aliases(tmp_path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("a:\n" + "".join(f"  k{i}: 1\n" for i in range(50_001)))
    with pytest.raises(ConfigError) as caught:
        load_yaml(path)
    assert "holds more than 100000 values" in str(caught.value)
    assert "alias" not in str(caught.value)


def test_an_error_in_an_extended_file_names_that_file(tmp_path, capsys) -> None:
    from prior_gen.cli import main as prior_gen_main
    from trainer.config import load_run_config

    smoke = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
    base = tmp_path / "base.yaml"
    base.write_text(f"extends: {smoke}\nprior:\n  scm:\n    widht: [12, 36]\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nseed: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_run_config(child)
    assert str(caught.value).startswith("prior.scm.widht: unknown key")
    assert f"(in {base} (extended by {child}))" in str(caught.value)
    with pytest.raises(SystemExit):
        prior_gen_main(["--config", str(child), "--out", str(tmp_path / "out")])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"prior-gen: error: {base} (extended by {child}): prior.scm.widht")
    # a key the file itself sets is named with the file
    child.write_text("extends: base.yaml\nseed: -1\nprior: {scm: {widht: null}}\n")
    with pytest.raises(ConfigError, match=rf"^prior.scm.widht: .*\(in {child}\)$"):
        load_run_config(child)
