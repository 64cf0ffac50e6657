"""``prior-gen --scheduler`` on what is not a healthy scheduler: the check ``puicl predict``
runs (puicl_common.dask_scheduler), one line within its time limit, and nothing written."""

from __future__ import annotations

import pytest
from prior_gen_testlib import SMOKE

from prior_gen import runner
from prior_gen.cli import main
from tests.stranger_servers import REPLIES, Stranger

distributed = pytest.importorskip("distributed")


def _refused(address: str, out, capsys) -> str:
    """The one line ``prior-gen --scheduler ADDRESS`` exits with, status 2; nothing in ``out``."""
    with pytest.raises(SystemExit) as stop:
        main(["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(out),
              "--scheduler", address])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    assert not out.exists()  # no manifest.json, no lock
    return error


@pytest.mark.timeout(60)  # before the check, the silent and HTTP servers held it for minutes
@pytest.mark.parametrize("reply", list(REPLIES))
def test_a_server_that_is_no_scheduler_is_refused_in_one_line(tmp_path, capsys, monkeypatch,
                                                              reply) -> None:
    monkeypatch.setattr(runner, "SCHEDULER_TIMEOUT_S", 1)
    stranger = Stranger(REPLIES[reply])
    try:
        error = _refused(stranger.address, tmp_path / "shards", capsys)
    finally:
        stranger.close()
    assert error.startswith(f"prior-gen: error: cannot reach the dask scheduler at "
                            f"{stranger.address}: "), error


@pytest.mark.timeout(120)
def test_a_scheduler_without_workers_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(runner, "SCHEDULER_TIMEOUT_S", 1)
    with distributed.LocalCluster(n_workers=0, processes=False,
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        error = _refused(address, tmp_path / "shards", capsys)
    assert error == (f"prior-gen: error: the dask scheduler at {address} has no workers (none "
                     f"joined within 1 s); start some, e.g. dask worker {address}\n")


@pytest.mark.timeout(120)
def test_a_run_past_the_workers_memory_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch) -> None:
    """On a cluster the SCMs run on the workers: their memory limit per thread is the budget
    (width 1,024 x depth 64: an estimated 6.3 GB for a step of 8 tasks)."""
    import yaml

    monkeypatch.setattr(runner, "SCHEDULER_TIMEOUT_S", 5)
    data = yaml.safe_load(SMOKE.read_text())
    data["prior"]["scm"].update(width=[1024, 1024], depth=[64, 64])
    config = tmp_path / "wide.yaml"
    config.write_text(yaml.safe_dump(data))
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                       memory_limit="2GB", dashboard_address=None)
    with cluster, pytest.raises(SystemExit) as stop:
        main(["--config", str(config), "--stages", "1", "--steps", "0-1",
              "--out", str(tmp_path / "shards"), "--scheduler", cluster.scheduler_address])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"prior-gen: error: {config}'s SCMs would hold an estimated 6.")
    assert "more than a dask worker's memory limit per thread (1.0 GB)" in error
    assert error.count("\n") == 1 and not (tmp_path / "shards").exists()
