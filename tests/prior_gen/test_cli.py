"""``prior-gen`` command line: generation, inspect, and clear errors for bad arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prior_gen_testlib import PAPER, REPO, SMOKE

from prior_gen.cli import main


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--config", "configs/paper.yaml", "--stages", "101"],
            "stage 101 is outside 1..100 of configs/paper.yaml",
        ),
        (["--config", "configs/paper.yaml", "--stages", "1-3,0"], "stage 0 is outside 1..100"),
        (["--config", "configs/smoke.yaml", "--stages", "two"], "bad stage 'two' in --stages"),
        (["--config", "configs/smoke.yaml", "--stages", "3-1"], "stage range '3-1' runs backwards"),
        (["--config", "configs/smoke.yaml", "--stages", "1,,2"], "empty item in --stages"),
        (["--config", "configs/smoke.yaml", "--steps", "3-1"], "bad --steps '3-1'"),
        (["--config", "configs/smoke.yaml", "--steps", "a"], "bad --steps 'a' (use A-B"),
        (
            ["--config", "configs/smoke.yaml", "--stages", "tail", "--steps", "2-9"],
            "--steps 2-9: stage tail of configs/smoke.yaml has steps 0..3",
        ),
        (["--config", "configs/smoke.yaml", "--workers", "0"], "--workers must be >= 1, got 0"),
        (["--config", "configs/smoke.yaml", "--split", "test"], "invalid choice: 'test'"),
        (["--config", "configs/smoke.yaml", "--format", "csv"], "invalid choice: 'csv'"),
        (["--config", "nowhere.yaml"], "config file nowhere.yaml not found; pass --config PATH"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(capsys, monkeypatch, argv, message) -> None:
    monkeypatch.chdir(REPO)
    assert message in _error(capsys, argv)


def test_missing_default_config_says_to_pass_config(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    err = _error(capsys, ["--stages", "1"])
    assert "config file configs/paper.yaml (the default) not found; pass --config PATH" in err


def test_bad_config_value_is_named(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMOKE.read_text().replace("init_std: 0.8", "init_std: -0.8"))
    assert "prior.scm.init_std: must be positive, got -0.8" in _error(
        capsys, ["--config", str(bad)]
    )
    bad.write_text(SMOKE.read_text() + "\ntrainer: {}\n")
    assert "trainer: unknown top-level section" in _error(capsys, ["--config", str(bad)])


def test_generate_then_inspect(capsys, tmp_path) -> None:
    out = tmp_path / "shards"
    argv = ["--config", str(SMOKE), "--stages", "1-2,tail", "--out", str(out), "--workers", "1"]
    assert main(argv) == 0
    line = capsys.readouterr().out
    assert "6 shards written (96 tasks" in line and "0 already present" in line
    assert main([*argv, "--format", "zarr"]) == 0
    assert "0 shards written (0 tasks, 0.0 MB), 6 already present" in capsys.readouterr().out
    assert (
        main(
            [
                "--config",
                str(SMOKE),
                "--stages",
                "3",
                "--steps",
                "1-1",
                "--seed",
                "0",
                "--out",
                str(out),
                "--workers",
                "1",
                "--split",
                "val",
            ]
        )
        == 0
    )
    capsys.readouterr()

    plot = tmp_path / "stats.png"
    assert main(["inspect", str(out), "--plot", str(plot), "--verify"]) == 0
    text = capsys.readouterr().out
    assert f"config            {SMOKE}" in text
    assert "split train: 3 stages, 96 tasks" in text and "split val: 1 stages, 16 tasks" in text
    assert "verify: every shard matches its sha256" in text
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"
    rows = [line.split() for line in text.splitlines() if line.strip().startswith("tail ")]
    assert rows and rows[0][1:3] == ["4", "32"]  # steps, tasks


def test_runtime_refusals_exit_1(capsys, tmp_path) -> None:
    out = tmp_path / "shards"
    base = [
        "--config",
        str(SMOKE),
        "--stages",
        "1",
        "--steps",
        "0",
        "--out",
        str(out),
        "--workers",
        "1",
    ]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "--seed", "3"]) == 1
    assert "holds shards of another configuration" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 1
    assert "manifest.json not found" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "prior-gen"
    if not script.exists():
        pytest.skip("prior-gen console script not installed in this environment")
    import subprocess

    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "--stages" in result.stdout and "inspect" in result.stdout
    assert PAPER.exists()


def test_inspect_without_verify_checks_sizes_and_says_contents_were_not_verified(
    capsys, tmp_path
) -> None:
    out = tmp_path / "shards"
    argv = ["--config", str(SMOKE), "--stages", "1", "--steps", "0-1", "--out", str(out),
            "--workers", "1", "--format", "webdataset"]
    assert main(argv) == 0
    shard = next(out.rglob("*.tar"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only --verify can tell
    shard.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert "contents were not verified (--verify re-hashes every shard)" in capsys.readouterr().out
    assert main(["inspect", str(out), "--verify"]) == 1
    capsys.readouterr()
    shard.write_bytes(bytes(data[:-100]))  # truncated: caught without --verify
    assert main(["inspect", str(out)]) == 1
    text = capsys.readouterr().out
    assert f"check: 1 shard(s) missing or of the wrong size:\n  {shard}" in text
