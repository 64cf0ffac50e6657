"""``puicl predict --scheduler`` on what is not a healthy scheduler, and on CSV files whose
types a worker would guess wrong from its first rows: one line within the documented time, or
the bytes of one process."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.files import dask_scoring
from puicl_model.files.cli import main
from tests.expected_scores import in_memory_scores_csv
from tests.stranger_servers import REPLIES, Stranger

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


@pytest.fixture
def table_csv(tmp_path, rng):
    frame = pd.DataFrame({"a": rng.normal(size=60), "s": np.r_[np.ones(15), np.zeros(45)]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv"


@pytest.mark.timeout(60)  # before the fix the silent server held the command for 300 s
@pytest.mark.parametrize("reply", list(REPLIES))
def test_a_server_that_is_no_scheduler_is_refused_in_one_line(table_csv, tmp_path, capsys,
                                                              monkeypatch, reply) -> None:
    monkeypatch.setattr(dask_scoring, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("the model ran"))
    stranger = Stranger(REPLIES[reply])
    try:
        code = main(["predict", "--input", str(table_csv), "--label-column", "s",
                     "--scheduler", stranger.address, "-o", str(tmp_path / "o.csv")])
    finally:
        stranger.close()
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"puicl predict: error: cannot reach the dask scheduler at "
                            f"{stranger.address}: ") and error.count("\n") == 1, error
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_scheduler_without_workers_is_refused_before_the_fit(table_csv, tmp_path, capsys,
                                                               monkeypatch) -> None:
    monkeypatch.setattr(dask_scoring, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("the model ran"))
    with distributed.LocalCluster(n_workers=0, processes=False,
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert main(["predict", "--input", str(table_csv), "--label-column", "s",
                     "--scheduler", address, "-o", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == (
        f"puicl predict: error: the dask scheduler at {address} has no workers (none joined "
        f"within 1 s); start some, e.g. dask worker {address}\n")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster


def tricky_table() -> pd.DataFrame:
    """Columns a worker reading from the first rows types wrong: True/False then "maybe",
    True/False with blanks further down, whole numbers with text and decimals further down."""
    rng = np.random.default_rng(11)
    n = 400
    flags = rng.random(n) < 0.5
    frame = pd.DataFrame({"a": rng.normal(size=n)})
    frame["maybe"] = np.r_[np.where(flags[:250], "True", "False"),
                           np.where(flags[250:], "maybe", "True")]
    frame["blanks"] = np.r_[np.where(flags[:300], "True", "False"),
                            np.where(flags[300:], "", "False")]
    frame["count"] = np.r_[rng.integers(0, 9, 300).astype(str),
                           np.where(flags[300:], "n/a", "2.5")]
    frame["s"] = (rng.random(n) < 0.25).astype(int)
    frame.loc[frame.s == 1, "a"] += 1.0
    return frame


@pytest.mark.slow
def test_workers_read_a_csv_as_one_process_does(cluster, small_weights, tmp_path) -> None:
    path = tmp_path / "t.csv"
    tricky_table().to_csv(path, index=False)
    before = path.read_bytes()
    args = ["predict", "--input", str(path), "--label-column", "s", "--weights",
            str(small_weights), "--no-progress", "--batch-rows", "40"]  # small partitions
    assert main([*args, "-o", str(tmp_path / "local.csv")]) == 0
    assert main([*args, "--scheduler", cluster.scheduler_address,
                 "-o", str(tmp_path / "dask.csv")]) == 0
    expected = in_memory_scores_csv(path, small_weights)
    assert (tmp_path / "local.csv").read_bytes() == expected
    assert (tmp_path / "dask.csv").read_bytes() == expected
    assert path.read_bytes() == before


@pytest.mark.slow
def test_a_quoted_line_break_is_refused_before_the_fit(cluster, small_weights, tmp_path,
                                                       capsys, monkeypatch) -> None:
    frame = tricky_table().head(60).copy()
    frame.loc[40, "maybe"] = "two\nlines"
    frame.to_csv(tmp_path / "t.csv", index=False)
    monkeypatch.setattr(PUICLClassifier, "fit", lambda *a, **k: pytest.fail("the model ran"))
    assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                 "--weights", str(small_weights), "--scheduler", cluster.scheduler_address,
                 "--batch-rows", "5", "-o", str(tmp_path / "o.csv")]) == 2
    assert capsys.readouterr().err == (
        f"puicl predict: error: {tmp_path / 't.csv'}: a quoted cell holds a line break, where "
        "dask's CSV reader would cut the file; score it without --scheduler, or convert it to "
        "Parquet\n")
