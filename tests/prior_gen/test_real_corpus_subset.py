"""scripts/subset_real_corpus.py: a part of a corpus keeps its tables' entries byte for byte and
in order, the inverted part is the rest, and bad input is refused before anything is written."""

from __future__ import annotations

import numpy as np
import pytest
from prior_gen_testlib import load_script

from prior_gen.mechanisms.real_tables import load_corpus, write_corpus


@pytest.fixture(scope="module")
def subsetter():
    return load_script("subset_real_corpus")


@pytest.fixture
def corpus(tmp_path):
    rng = np.random.default_rng(0)
    shapes = [(30, 3), (20, 5), (25, 2), (40, 4), (10, 6)]
    entries = [(rng.normal(size=s).astype(np.float32), rng.integers(0, 2, s[0]).astype(np.int8))
               for s in shapes]
    names = [{"table": "AER::a", "targets": ["t0", "t1"]}, {"table": "MASS::b", "targets": ["t"]},
             {"table": "AER::c", "targets": ["u0", "u1"]}]
    path = tmp_path / "corpus.npz"
    return path, write_corpus(path, entries, [0, 0, 1, 2, 2], names)


def _tables(corpus) -> dict[str, list[tuple[bytes, bytes]]]:
    """Each table's entries as bytes, in the corpus's order."""
    return {name["table"]: [(corpus.x[e].tobytes(), corpus.y[e].tobytes())
                            for e in corpus.entries_of_table[t]]
            for t, name in enumerate(corpus.names)}


def test_a_part_and_its_inverse_split_the_tables_and_keep_their_bytes(subsetter, corpus,
                                                                      tmp_path, capsys) -> None:
    path, digest = corpus
    whole = _tables(load_corpus(path, digest))
    parts = {}
    for flag in ([], ["--invert"]):
        out = tmp_path / f"part{len(flag)}.npz"
        subsetter.main([str(path), digest, "--packages", "AER", "--out", str(out), *flag])
        printed = capsys.readouterr().out.split()
        parts[len(flag)] = load_corpus(out, printed[-1])
    kept, rest = _tables(parts[0]), _tables(parts[1])
    assert list(kept) == ["AER::a", "AER::c"] and list(rest) == ["MASS::b"]
    assert {**kept, **rest} == whole
    assert [n["targets"] for n in parts[0].names] == [["t0", "t1"], ["u0", "u1"]]


def test_an_unknown_package_or_an_empty_part_is_refused_and_nothing_written(subsetter, corpus,
                                                                            tmp_path,
                                                                            capsys) -> None:
    path, digest = corpus
    out = tmp_path / "part.npz"
    for more, message in ((["--packages", "AER,Nope"], "no table of Nope"),
                          (["--packages", "AER,MASS", "--invert"], "no table is left"),
                          (["--packages", " , "], "at least one package")):
        with pytest.raises(SystemExit):
            subsetter.main([str(path), digest, "--out", str(out), *more])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        subsetter.main([str(path), "0" * 64, "--packages", "AER", "--out", str(out)])
    assert "has SHA-256" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        subsetter.main([str(path), digest, "--packages", "AER", "--out", str(path)])
    assert "cannot replace" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.npz"]
