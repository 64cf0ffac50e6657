"""``puicl-bench --labeling``: biased (SAR) labeled positives. SCAR tasks keep their bytes; a
SAR task has the same rows, sizes and pool as the SCAR one and differs only in which
positives are labeled, drawn with probabilities rising with the mechanism's propensity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark import cli
from benchmark.datasets import Dataset, load_dataset
from benchmark.labeling import LABELINGS, SLOPE, choose_labeled, propensity
from benchmark.protocol import labeling_seed_sequence, make_task

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "datasets"
SAR = LABELINGS[1:]


def _dataset(n_pos: int = 600, n_neg: int = 400, slug: str = "synthetic") -> Dataset:
    """Two informative numeric columns, one noise column, one categorical column."""
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(n_pos, np.int8), np.zeros(n_neg, np.int8)]
    X = rng.normal(size=(len(y), 4))
    X[:, :2] += 1.5 * y[:, None]
    X[:, 3] = rng.integers(0, 3, len(y))
    X[::13, 2] = np.nan  # a missing value counts as the column mean
    return Dataset(slug=slug, name=slug, X=X, y=y, feature_names=("a", "b", "c", "d"),
                   categorical=(False, False, False, True), positive_label="1")


def _rows(task) -> list[bytes]:
    return sorted(row.tobytes() for row in task.X)


def test_scar_tasks_keep_their_bytes() -> None:
    """The protocol's pinned task (computed before --labeling existed) and the default."""
    rng = np.random.default_rng(0)
    y = np.array([1] * 900 + [0] * 700, dtype=np.int8)
    X = rng.normal(size=(len(y), 3)) + y[:, None]
    X[:, 0] = np.arange(len(y))
    data = Dataset(slug="synthetic", name="synthetic", X=X, y=y, feature_names=("id", "a", "b"),
                   categorical=(False, False, False), positive_label="1")
    pinned = "fc2b3909436466181e3ce1a035796ded1a9d954ec6dee5b0eb43ab1e8ea27943"
    assert make_task(data, 3, 7).fingerprint() == pinned
    assert make_task(data, 3, 7, labeling="scar").fingerprint() == pinned


@pytest.mark.skipif(not (SHARED_DATA / "haberman").is_dir(), reason="needs shared/datasets")
def test_scar_tasks_are_the_committed_results_tasks() -> None:
    published = pd.read_csv(REPO / "docs" / "benchmark" / "results.csv")
    data = load_dataset("haberman", SHARED_DATA)
    for rep in (0, 1, 9):
        rows = published[(published["dataset"] == "haberman") & (published["repetition"] == rep)]
        assert set(rows["task_sha256"]) == {make_task(data, rep, 0).fingerprint()}


@pytest.mark.parametrize("labeling", SAR)
def test_sar_changes_only_which_positives_are_labeled(labeling: str) -> None:
    data = _dataset()
    for rep in range(3):
        scar = make_task(data, rep, 0)
        sar = make_task(data, rep, 0, labeling=labeling)
        assert (sar.n_labeled, sar.n_u_pos, sar.n_u_neg) == (scar.n_labeled, scar.n_u_pos,
                                                             scar.n_u_neg) == (200, 400, 400)
        assert _rows(sar) == _rows(scar)  # the same drawn positives and negatives
        assert (sar.y_true[: sar.n_labeled] == 1).all() and sar.s[: sar.n_labeled].all()
        negatives = sar.y_true == 0  # the pool's negatives sit where the SCAR draw put them
        assert np.array_equal(negatives, scar.y_true == 0)
        assert np.array_equal(sar.X[negatives], scar.X[negatives], equal_nan=True)
        assert sar.fingerprint() != scar.fingerprint()
        assert sar.fingerprint() == make_task(data, rep, 0, labeling=labeling).fingerprint()
    other = make_task(_dataset(slug="other"), 0, 0, labeling=labeling)
    assert other.fingerprint() != make_task(data, 0, 0, labeling=labeling).fingerprint()


@pytest.mark.parametrize("labeling", SAR)
def test_labeled_positives_have_higher_propensity(labeling: str) -> None:
    """Over 20 seeds, the labeled third's mean propensity exceeds the others' by a wide
    margin every time (measured: ≥ 0.22 of the largest propensity; uniform draws: ≈ 0)."""
    data = _dataset()
    candidates = np.flatnonzero(data.y == 1)[:300]
    for seed in range(20):
        weights = propensity(labeling, data, candidates, np.random.default_rng(seed))
        order = choose_labeled(labeling, data, candidates, 100, np.random.default_rng(seed))
        assert sorted(order.tolist()) == candidates.tolist()
        labeled = np.isin(candidates, order[:100])
        gap = (weights[labeled].mean() - weights[~labeled].mean()) / weights.max()
        assert gap > 0.1, (seed, gap)


def test_sar_linear_is_a_logistic_of_a_random_projection() -> None:
    data = _dataset()
    candidates = np.flatnonzero(data.y == 1)[100:400]
    features = data.X[candidates]
    z = (features - np.nanmean(features, 0)) / np.nanstd(features, 0)
    z = np.nan_to_num(z)
    projection = z @ np.random.default_rng(5).standard_normal(4)
    projection = (projection - projection.mean()) / projection.std()
    expected = 1 / (1 + np.exp(-SLOPE * projection))
    got = propensity("sar-linear", data, candidates, np.random.default_rng(5))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_sar_top_labels_the_high_values_of_its_one_numeric_column() -> None:
    """With one varying numeric column (the others constant or categorical), sar-top ranks
    by it: the labeled positives' mean of that column beats the unlabeled positives'."""
    data = _dataset()
    X = data.X.copy()
    X[:, 1:3] = 1.0
    one_column = Dataset(slug="one", name="one", X=X, y=data.y, feature_names=data.feature_names,
                         categorical=data.categorical, positive_label="1")
    gaps = []
    for rep in range(10):
        task = make_task(one_column, rep, 0, labeling="sar-top")
        unlabeled_pos = task.X[task.n_labeled:][task.y_unlabeled == 1]
        gaps.append(task.X[: task.n_labeled, 0].mean() - unlabeled_pos[:, 0].mean())
    assert min(gaps) > 0.5  # standard-normal column: uniform labeling gives ≈ 0 ± 0.1


def test_the_labeling_stream_is_keyed_apart_from_the_task_and_per_mechanism() -> None:
    states = {tuple(labeling_seed_sequence(0, "adult", 1, m).generate_state(4)) for m in SAR}
    states.add(tuple(labeling_seed_sequence(1, "adult", 1, "sar-top").generate_state(4)))
    states.add(tuple(labeling_seed_sequence(0, "adult", 2, "sar-top").generate_state(4)))
    assert len(states) == len(SAR) + 2


def test_an_unknown_labeling_is_a_one_line_error(data_dir, tmp_path, capsys) -> None:
    argv = ["--methods", "elkan-noto", "--datasets", "haberman", "--labeling", "mnar",
            "--out", str(tmp_path / "x"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == ("puicl-bench: error: --labeling: unknown mechanism 'mnar' (known: scar, "
                   "sar-linear, sar-top, sar-posterior)\n")
    assert not (tmp_path / "x").exists()


def test_cli_records_the_labeling_in_results_table_and_provenance(data_dir, tmp_path) -> None:
    base = ["--methods", "elkan-noto", "--datasets", "haberman", "--repeats", "2",
            "--data-dir", str(data_dir), "--no-progress"]
    assert cli.main([*base, "--out", str(tmp_path / "scar")]) == 0
    assert cli.main([*base, "--labeling", "sar-linear", "--out", str(tmp_path / "sar")]) == 0
    scar = pd.read_csv(tmp_path / "scar" / "results.csv")
    sar = pd.read_csv(tmp_path / "sar" / "results.csv")
    assert "labeling" not in scar.columns  # a SCAR run's CSV keeps its columns
    assert list(sar.columns) == [*scar.columns, "labeling"]
    assert set(sar["labeling"]) == {"sar-linear"}
    assert not set(sar["task_sha256"]) & set(scar["task_sha256"])
    assert (sar[["n_labeled", "n_u_pos", "n_u_neg", "seed"]].to_numpy()
            == scar[["n_labeled", "n_u_pos", "n_u_neg", "seed"]].to_numpy()).all()
    table = (tmp_path / "sar" / "table.md").read_text()
    assert table.startswith("### Mean over 2 repetitions at π = 0.5, labeling sar-linear")
    assert "### Against the paper's Table 1" not in table
    assert "labeling" not in (tmp_path / "scar" / "table.md").read_text()
    provenance = json.loads((tmp_path / "sar" / "provenance.json").read_text())
    assert provenance["labeling"] == "sar-linear" and "labeled positives" in provenance[
        "seed_rule"]
    # the cache holds the SAR tasks: a report-only rerun finds every replicate
    assert cli.main([*base, "--labeling", "sar-linear", "--out", str(tmp_path / "sar"),
                     "--report-only"]) == 0


def test_a_dev_run_over_several_pi_names_the_labeling(tmp_path) -> None:
    folder = tmp_path / "devsuite"
    folder.mkdir()
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(120, int), np.zeros(80, int)]
    pd.DataFrame({"signal": rng.normal(size=200) + y, "colour": rng.choice(["a", "b"], 200),
                  "target": y}).to_csv(folder / "gamma.csv", index=False)
    pd.DataFrame({"slug": ["gamma"]}).to_csv(folder / "manifest.csv", index=False)
    out = tmp_path / "run"
    argv = ["--suite", "dev", "--data-dir", str(folder), "--methods", "elkan-noto",
            "--repeats", "1", "--pi", "0.2,0.5", "--labeling", "sar-top", "--out", str(out),
            "--no-progress"]
    assert cli.main(argv) == 0
    for pi in ("0.2", "0.5"):
        assert set(pd.read_csv(out / f"pi_{pi}" / "results.csv")["labeling"]) == {"sar-top"}
    assert (out / "summary.md").read_text().startswith(
        "### the development suite of 40 real tables from R packages (dev), labeling sar-top")
