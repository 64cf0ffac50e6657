"""Real-table tasks (prior.real_tables, prior_gen.mechanisms.real_tables): off by default and out
of the hash; the corpus is checked by its digest and written atomically; a real task keeps the
synthetic task's sizes and class shares where the entry has the rows, holds only the entry's rows
with their own labels and only varying columns; the other tasks keep their bytes; the draws are the
task's own; skip_scm makes the same tasks without the replaced tasks' SCMs; 1 and 2 workers, and
other CPU kernels, write the same shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from prior_gen_testlib import (
    SMOKE,
    data_digest,
    digests_under_cpu_variant,
    shard_digests,
    tiny_config,
)
from test_portable_golden import VARIANTS  # the CPU kernel variants of the golden digest

import prior_gen.generate as generate_module
from prior_gen.config import (
    PriorConfig,
    RealTablesConfig,
    generation_config_from_mapping,
)
from prior_gen.generate import generate_step
from prior_gen.mechanisms.real_tables import load_corpus, write_corpus
from prior_gen.runner import run_generation
from prior_gen.shards.storage import digest_path
from puicl_common.configio import ConfigError

SMOKE_HASH = "83e1f40f3dc44c7592e021a284aad85e148dceada6b229cabef232c0ef16c2e9"
SECTION_HASH = "58a15acbdd6543c8213e85744dc43f9e87446a943dd1e1c206b37d05e96f2942"


def _entry(seed: int, rows: int, columns: int, positives: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, columns)).astype(np.float32)
    x[:, 0] = np.arange(rows)  # a row's identity, to find it again in a task
    x[:, 1] = seed  # constant within the entry: never kept
    y = (rng.random(rows) < positives).astype(np.int8)
    return x, y


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, str, list[tuple[np.ndarray, np.ndarray]]]:
    entries = [_entry(1, 400, 6, 0.5), _entry(2, 300, 30, 0.7), _entry(3, 60, 4, 0.3)]
    names = [{"table": "a::one", "targets": ["t0", "t1"]}, {"table": "b::two", "targets": ["t"]}]
    path = tmp_path / "corpus.npz"
    digest = write_corpus(path, entries, [0, 0, 1], names)
    return path, digest, entries


def _config(path: Path, digest: str, probability: float = 0.5, **more):
    return tiny_config(prior={"real_tables": {"corpus": str(path), "sha256": digest,
                                              "probability": probability, **more}})


def _tasks(config, stages=(1, 2, 3, "tail"), steps=(0, 1)):
    return [t for s in stages for step in steps for t in generate_step(config, "train", s, step)]


def test_absent_or_null_keeps_the_hash_and_a_section_enters_it(corpus) -> None:
    path, digest, _ = corpus
    assert PriorConfig.LEGACY_VALUES["real_tables"] is None
    assert tiny_config().prior.real_tables is None and tiny_config().hash() == SMOKE_HASH
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["real_tables"] = None
    assert generation_config_from_mapping(data).hash() == SMOKE_HASH
    other = "0" * 64
    hashes = {SMOKE_HASH, _config(path, digest).hash(), _config(path, digest, 0.3).hash(),
              _config(path, other).hash(), _config(path, digest, skip_scm=True).hash()}
    assert len(hashes) == 5
    assert RealTablesConfig.LEGACY_VALUES["skip_scm"] is False
    assert _config(path, digest, skip_scm=False).hash() == _config(path, digest).hash()
    # a section as written before skip_scm existed keeps the hash it had then
    before = {"corpus": "x.npz", "sha256": "0" * 64, "probability": 0.9}
    assert tiny_config(prior={"real_tables": before}).hash() == SECTION_HASH


@pytest.mark.parametrize(
    ("real_tables", "message"),
    [
        ({"sha256": "abc"}, "prior.real_tables.sha256: must be the corpus file's SHA-256"),
        ({"sha256": "A" * 64}, "prior.real_tables.sha256: must be the corpus file's SHA-256"),
        ({"sha256": "0" * 64, "probability": 2}, "prior.real_tables.probability: must lie in"),
        ({"sha256": "0" * 64, "corpus": ""}, "prior.real_tables.corpus: must name the corpus"),
        ({"sha256": "0" * 64, "share": 0.5}, "prior.real_tables.share: unknown key"),
        ({"sha256": "0" * 64, "skip_scm": "yes"}, "prior.real_tables.skip_scm:"),
    ],
)
def test_bad_settings_are_errors_naming_the_key(real_tables: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(prior={"real_tables": real_tables})
    assert message in str(err.value)


def test_the_corpus_round_trips_and_a_changed_or_missing_file_is_an_error(corpus) -> None:
    path, digest, entries = corpus
    assert digest_path(path)[0] == digest
    loaded = load_corpus(path, digest)
    for (x, y), x_loaded, y_loaded in zip(entries, loaded.x, loaded.y, strict=True):
        assert np.array_equal(x, x_loaded) and np.array_equal(y, y_loaded)
    assert [list(e) for e in loaded.entries_of_table] == [[0, 1], [2]]
    assert loaded.names[1]["table"] == "b::two"
    changed = path.with_name("changed.npz")
    changed.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(ValueError, match=f"has SHA-256 .* the config names {digest}"):
        load_corpus(changed, digest)
    with pytest.raises(ValueError, match=r"build_real_corpus\.py"):
        load_corpus(path.with_name("absent.npz"), digest)
    with pytest.raises(ValueError, match="at least one entry"):
        write_corpus(path.with_name("empty.npz"), [], [], [])
    assert sorted(p.name for p in path.parent.iterdir()) == ["changed.npz", "corpus.npz"]


def test_real_tasks_hold_an_entrys_rows_and_the_others_keep_their_bytes(corpus) -> None:
    path, digest, entries = corpus
    tasks, plain = _tasks(_config(path, digest)), _tasks(tiny_config())
    real = 0
    for task, before in zip(tasks, plain, strict=True):
        entry = task.meta.pop("real_table")
        if entry == -1:
            assert data_digest([task]) == data_digest([before])
            continue
        real += 1
        x, y = entries[entry]
        assert task.n_features <= before.n_features
        assert (task.y[: task.n_labeled] == 1).all() and task.y.dtype == np.int8
        assert (task.x.max(axis=0) > task.x.min(axis=0)).all()  # no constant column
        columns = _kept_columns(task, x)
        assert len(set(columns)) == task.n_features
        rows = _rows_of(task, x, columns)
        assert len(set(rows)) == task.n_rows  # distinct rows of the entry
        positive_value = int(y[rows[0]])
        assert np.array_equal(task.y, (y[rows] == positive_value).astype(np.int8))
        pool_negatives = task.n_unlabeled - int(task.y[task.n_labeled:].sum())
        assert task.meta["realized_pi"] == pool_negatives / task.n_unlabeled
        if entry != 2:  # entries 0 and 1 have the rows: the synthetic task's sizes and shares
            assert (task.n_labeled, task.n_unlabeled) == (before.n_labeled, before.n_unlabeled)
            assert task.meta["realized_pi"] == before.meta["realized_pi"]
        else:  # 60 rows: scaled down, the class shares kept to within rounding
            assert task.n_rows <= 60
            assert abs(task.meta["realized_pi"] - before.meta["realized_pi"]) < 0.1
    assert 0 < real < len(tasks)


def _kept_columns(task, x: np.ndarray) -> list[int]:
    """The entry's column index of each task column (matched by its values on the rows)."""
    found = []
    for column in task.x.T:
        matches = [j for j in range(x.shape[1]) if np.isin(column, x[:, j]).all()]
        assert matches, "a task column that is none of the entry's"
        found.append(matches[0])
    return found


def _rows_of(task, x: np.ndarray, columns: list[int]) -> list[int]:
    rows = []
    for row in task.x:
        hits = np.flatnonzero((x[:, columns] == row).all(axis=1))
        assert hits.size >= 1, "a task row that is none of the entry's"
        rows.append(int(hits[0]))
    return rows


def test_the_draws_are_the_tasks_own(corpus) -> None:
    path, digest, _ = corpus
    config = _config(path, digest, probability=1.0)
    first = generate_step(config, "train", 2, 1)
    again = generate_step(config, "train", 2, 1)
    assert data_digest(first) == data_digest(again)
    other_step = generate_step(config, "train", 2, 0)
    assert data_digest(first) != data_digest(other_step)
    assert all(task.meta["real_table"] >= 0 for task in first)


@pytest.mark.parametrize("probability", [0.5, 1.0])
def test_skip_scm_cuts_the_same_tasks_without_running_their_scm(
    corpus, probability: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The features, labels and sizes of every task are those made with the replaced task's
    SCM run; only a real task's SCM keys differ (attempts and n_generated 0, no label_node);
    and the SCM runs for the synthetic tasks alone."""
    path, digest, _ = corpus
    with_scm = _tasks(_config(path, digest, probability))
    forwarded = []
    original = generate_module._forward

    def counting_forward(plans, config):
        forwarded.extend((plan.stage, plan.step, plan.index) for plan in plans)
        return original(plans, config)

    monkeypatch.setattr(generate_module, "_forward", counting_forward)
    skipped = _tasks(_config(path, digest, probability, skip_scm=True))
    synthetic = 0
    for before, task in zip(with_scm, skipped, strict=True):
        assert task.n_labeled == before.n_labeled
        assert task.x.tobytes() == before.x.tobytes() and task.y.tobytes() == before.y.tobytes()
        if task.meta["real_table"] == -1:
            synthetic += 1
            assert task.meta == before.meta
            continue
        assert (task.meta["attempts"], task.meta["n_generated"]) == (0, 0)
        assert "label_node" not in task.meta
        changed = {k for k in before.meta if task.meta.get(k) != before.meta[k]}
        assert changed <= {"attempts", "n_generated", "label_node"}
    assert len(forwarded) == len(set(forwarded)) == synthetic
    assert synthetic < len(skipped) and (probability == 1.0) == (synthetic == 0)


@pytest.mark.slow  # a worker pool
@pytest.mark.parametrize("skip_scm", [False, True])
def test_two_workers_give_the_same_bytes(corpus, tmp_path: Path, skip_scm: bool) -> None:
    path, digest, _ = corpus
    config = _config(path, digest, skip_scm=skip_scm)
    stages = [1, 3, "tail"]
    run_generation(config, "train", stages, tmp_path / "one", workers=1)
    run_generation(config, "train", stages, tmp_path / "two", workers=2)
    assert shard_digests(tmp_path / "one") == shard_digests(tmp_path / "two")


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize(
    "variant", [v for v in ("openblas-prescott", "numpy-baseline") if v in VARIANTS]
)
def test_other_cpu_kernels_give_the_same_bytes(corpus, tmp_path: Path, variant: str) -> None:
    """With the SCM's portable arithmetic (the synthetic tasks' own condition, as in
    test_portable_golden.py); with skip_scm, whose tasks' bytes equal those without it
    (above)."""
    path, digest, _ = corpus
    portable = {"noise_sampler": "table", "arithmetic": "portable"}
    real_tables = {"corpus": str(path), "sha256": digest, "probability": 0.5, "skip_scm": True}
    config = tiny_config(prior={"scm": portable, "real_tables": real_tables})
    run_generation(config, "train", [1, "tail"], tmp_path / "here", workers=1)
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"].update(portable)
    data["prior"]["real_tables"] = real_tables
    config_path = tmp_path / "real_tables.yaml"
    config_path.write_text(yaml.safe_dump(data))
    assert generation_config_from_mapping(data).hash() == config.hash()
    there = digests_under_cpu_variant(config_path, tmp_path / "there", VARIANTS[variant])
    assert there == shard_digests(tmp_path / "here")


def _npz(path: Path, **arrays) -> str:
    with open(path, "wb") as out:
        np.savez(out, **arrays)
    return digest_path(path)[0]


def _broken_corpora(path: Path, good: Path):
    """(name, bytes-writer) of corpora that cannot be used."""
    with np.load(good) as data:
        arrays = {name: data[name] for name in data.files}
    values = arrays["values"].copy()
    values[7] = np.inf
    wide = arrays["values"].astype(np.float64)
    wide[7] = 1e300  # finite as float64, +inf as the float32 a task holds
    # 400 × (6 + 2**60) wraps round to 400 × 6 in uint64: the shapes seem to match the values
    overflowing = arrays["shapes"].astype(np.uint64)
    overflowing[0, 1] += np.uint64(2**60)
    one_class = arrays["labels"].copy()
    one_class[:400] = 1  # the first entry's rows
    return {
        "not an npz": lambda: path.write_bytes(b"not a zip file at all"),
        "a key missing": lambda: _npz(path, **{k: v for k, v in arrays.items() if k != "tables"}),
        "an inf": lambda: _npz(path, **{**arrays, "values": values}),
        "all NaN": lambda: _npz(path, **{**arrays, "values": np.full_like(values, np.nan)}),
        "shapes that lie": lambda: _npz(path, **{**arrays, "shapes": arrays["shapes"] * 2}),
        "labels of 2": lambda: _npz(path, **{**arrays, "labels": arrays["labels"] * 2}),
        "names not JSON": lambda: _npz(path, **{**arrays, "names": np.frombuffer(b"{x", np.uint8)}),
        "a table index out of range": lambda: _npz(path, **{**arrays,
                                                             "tables": arrays["tables"] + 5}),
        "float64 beyond float32": lambda: _npz(path, **{**arrays, "values": wide}),
        "shapes that overflow": lambda: _npz(path, **{**arrays, "shapes": overflowing}),
        "a table without an entry": lambda: _npz(path, **{**arrays,
                                                          "tables": np.zeros(3, np.int64)}),
        "an entry of one class": lambda: _npz(path, **{**arrays, "labels": one_class}),
    }


@pytest.mark.parametrize("case", ["not an npz", "a key missing", "an inf", "all NaN",
                                  "shapes that lie", "labels of 2", "names not JSON",
                                  "a table index out of range", "float64 beyond float32",
                                  "shapes that overflow", "a table without an entry",
                                  "an entry of one class"])
def test_a_corpus_that_cannot_be_used_is_refused_in_one_line_before_anything_is_written(
        corpus, tmp_path, capsys, case) -> None:
    from prior_gen.cli import main

    good, _, _ = corpus
    bad = tmp_path / "bad.npz"
    _broken_corpora(bad, good)[case]()
    config = tmp_path / "config.yaml"
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["real_tables"] = {"corpus": str(bad), "sha256": digest_path(bad)[0],
                                    "probability": 0.5}
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "shards"
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(config), "--stages", "1", "--steps", "0", "--out", str(out)])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prior-gen: error: prior.real_tables.corpus:")
    assert str(bad) in lines[0]
    assert not out.exists()
    where = {"an inf": "table 'a::one' (entry 0), row 1, column 1: inf",
             "float64 beyond float32": "table 'a::one' (entry 0), row 1, column 1: 1e+300, "
                                       "beyond float32's range",
             "a table without an entry": "table 'b::two' (number 1) has no entry",
             "an entry of one class": "entry 0 (table 'a::one') holds one class only"}
    assert where.get(case, "") in lines[0]
