"""``puicl-bench --pi``: the target negative share of the unlabeled pool (paper §6.1 fixes it
at 0.5), so that class-prior estimates can be measured across π."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmark import cli
from benchmark.protocol import composition


def test_composition_follows_the_target_pi() -> None:
    assert composition(5000, 3000, target_pi=0.2) == (200, 400, 100)
    assert composition(5000, 3000, target_pi=0.8) == (200, 400, 1600)


@pytest.mark.parametrize(("pi", "negatives"), [(0.2, 25), (0.5, 60)])
def test_cli_pi_sets_the_tasks_negative_share(data_dir, tmp_path, pi,
                                              negatives) -> None:
    out = tmp_path / f"bench-{pi}"
    argv = ["--methods", "elkan-noto", "--datasets", "haberman", "--repeats", "1", "--pi",
            str(pi), "--out", str(out), "--data-dir", str(data_dir), "--no-progress"]
    assert cli.main(argv) == 0
    row = pd.read_csv(out / "results.csv").iloc[0]
    # 150 positives: 50 labeled, 100 unlabeled; negatives as many as π asks (60 exist)
    assert (row["n_labeled"], row["n_u_pos"], row["n_u_neg"]) == (50, 100, negatives)
    assert json.loads((out / "provenance.json").read_text())["target_pi"] == pi
    # the paper's Table 1 is at π = 0.5: compared there, and only there
    table = (out / "table.md").read_text()
    assert f"repetitions at π = {pi:g}" in table
    assert f"realized on average: {negatives / (100 + negatives):.3f}" in table
    assert ("### Against the paper's Table 1" in table) == (pi == 0.5)


def test_cli_rejects_a_pi_outside_0_1(data_dir, tmp_path, capsys) -> None:
    argv = ["--methods", "elkan-noto", "--datasets", "haberman", "--pi", "1.0",
            "--out", str(tmp_path / "x"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    assert "puicl-bench: error: --pi must be in [0, 1), got 1.0" in capsys.readouterr().err
