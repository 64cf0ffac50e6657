"""Scoring on dask (puicl_model.files.dask_scoring): by partition on a 2-worker LocalCluster, the
bytes
of one process, for any number of partitions, through the API and ``puicl predict
--scheduler``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.files.cli import main

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


@pytest.fixture
def frame(table, rng) -> pd.DataFrame:
    X, s = table(rng, 30, 700, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["kind"] = pd.Categorical(rng.choice(["x", "y"], len(frame)))
    frame["s"] = s
    return frame


def test_partitions_score_the_bytes_of_one_process(cluster, frame, small_weights) -> None:
    from puicl_model.estimator import dask_frames

    features, s = frame.drop(columns="s"), frame["s"].to_numpy()
    clf = PUICLClassifier(weights=small_weights, pool_sample=200, threshold="prior")
    clf.fit(features, s)
    pool = features[s == 0].reset_index(drop=True)
    expected = clf.predict_proba(pool)
    for partitions in (1, 4):
        X = dd.from_pandas(pool, npartitions=partitions)
        np.testing.assert_array_equal(dask_frames.predict_proba(clf, X).compute(), expected)
        np.testing.assert_array_equal(dask_frames.predict(clf, X).compute(), clf.predict(pool))


def test_puicl_predict_on_a_scheduler_writes_the_local_scores(cluster, frame, small_weights,
                                                                tmp_path) -> None:
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=150)  # five partitions
    frame.to_csv(tmp_path / "t.csv", index=False)
    address = cluster[0].scheduler_address
    for name in ("t.parquet", "t.csv"):
        args = ["predict", "--input", str(tmp_path / name), "--label-column", "s", "--weights",
                str(small_weights), "--pool-sample", "200", "--no-progress", "--batch-rows",
                "100"]
        assert main([*args, "-o", str(tmp_path / "local.parquet")]) == 0
        assert main([*args, "--scheduler", address, "-o", str(tmp_path / "dask.parquet")]) == 0
        local, spread = (pd.read_parquet(tmp_path / f"{k}.parquet") for k in ("local", "dask"))
        pd.testing.assert_frame_equal(spread, local, check_exact=True)
        assert len(local) == int((frame.s == 0).sum())


def test_a_duplicated_row_gets_its_own_score_on_a_scheduler(cluster, frame, small_weights,
                                                            tmp_path) -> None:
    pool = frame.index[frame.s == 0]
    table = pd.concat([frame, frame.loc[pool[:10]]], ignore_index=True)  # copies further down
    table.to_parquet(tmp_path / "t.parquet", row_group_size=150)  # six partitions
    features, s = table.drop(columns="s"), table["s"].to_numpy()
    chunks = {"single_pass_limit": 60, "chunk_size": 40}  # copies in other chunks
    for sample in ("0", "200"):
        args = ["predict", "--input", str(tmp_path / "t.parquet"), "--label-column", "s",
                "--weights", str(small_weights), "--pool-sample", sample, "--no-progress",
                "--batch-rows", "100", *(f"--{k.replace('_', '-')}={v}" for k, v in
                                         chunks.items())]
        assert main([*args, "-o", str(tmp_path / "local.parquet")]) == 0
        assert main([*args, "--scheduler", cluster[0].scheduler_address, "-o",
                     str(tmp_path / "dask.parquet")]) == 0
        local, spread = (pd.read_parquet(tmp_path / f"{k}.parquet") for k in ("local", "dask"))
        pd.testing.assert_frame_equal(spread, local, check_exact=True)
        if sample == "0":  # the whole pool in one piece: each row its own score
            clf = PUICLClassifier(weights=small_weights, pool_sample=None, **chunks)
            expected = clf.fit(features, s).predict_proba(features[s == 0])[:, 1]
            np.testing.assert_array_equal(spread["p_positive"], expected)


def test_puicl_predict_refuses_an_unreachable_scheduler_before_fitting(frame, tmp_path,
                                                                      monkeypatch, capsys) -> None:
    import socket

    from puicl_model.files import dask_scoring

    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setattr(dask_scoring, "CONNECT_TIMEOUT_S", 1)
    fitted = []
    monkeypatch.setattr("puicl_model.files.large_tables.fit_on_input",
                        lambda *args: fitted.append(args))
    frame.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "scores.parquet"
    args = ["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
            "--scheduler", f"tcp://127.0.0.1:{port}", "-o", str(out)]
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"puicl predict: error: cannot reach the dask scheduler at "
                            f"tcp://127.0.0.1:{port}")
    assert "\n" not in error and not fitted and not out.exists()


def test_puicl_predict_on_a_scheduler_shows_the_rows_written_on_a_terminal(
        cluster, frame, small_weights, tmp_path, monkeypatch, capsys) -> None:
    import sys

    frame.to_parquet(tmp_path / "t.parquet", row_group_size=150)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args = ["predict", "--input", str(tmp_path / "t.parquet"), "--label-column", "s",
            "--weights", str(small_weights), "--pool-sample", "200",
            "--scheduler", cluster[0].scheduler_address, "-o", str(tmp_path / "d.parquet")]
    assert main(args) == 0
    n_pool = int((frame.s == 0).sum())
    bar = capsys.readouterr().err
    assert "puicl predict (dask):" in bar and f"/{n_pool} [" in bar  # the pool's rows
    assert main([*args, "--no-progress"]) == 0
    assert "puicl predict (dask)" not in capsys.readouterr().err
    assert len(pd.read_parquet(tmp_path / "d.parquet")) == n_pool
