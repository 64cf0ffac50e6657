"""scripts/build_wheelhouse.py: which requirements a target needs, and (slow, needs the package
index) an offline install into a fresh venv that then runs the smoke pipeline."""

from __future__ import annotations

import glob
import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import torch

from .conftest import ROOT, SMOKE

SCRIPT = ROOT / "scripts" / "build_wheelhouse.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("build_wheelhouse", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wheelhouse = _load_script()


def _requirements(*texts: str):
    return [wheelhouse.Requirement(t) for t in texts]


def test_requirements_of_the_core_and_the_chosen_extras_for_the_target() -> None:
    requirements = _requirements(
        "numpy>=1.24",
        "torch>=2.3",
        'tomli>=2; python_version < "3.11"',
        'zarr<3.2,>=3.0; extra == "train"',
        'numba>=0.60; extra == "prior"',
        'pywin32; sys_platform == "win32" and extra == "train"',
        'puicl[prior,train]; extra == "dev"',
        'pytest>=8; extra == "dev"',
        'dask[distributed]>=2024.1; extra == "distributed"',
    )
    linux_310 = wheelhouse.target_environment("3.10", "manylinux_2_28_x86_64")
    linux_312 = wheelhouse.target_environment("3.12", "manylinux_2_28_x86_64")
    assert wheelhouse.select_requirements(requirements, [], linux_312, []) == [
        "numpy>=1.24", "torch>=2.3"
    ]
    # markers are decided for the target, not this interpreter
    assert "tomli>=2" in wheelhouse.select_requirements(requirements, [], linux_310, [])
    assert wheelhouse.select_requirements(requirements, ["train"], linux_312, ["torch"]) == [
        "numpy>=1.24", "zarr<3.2,>=3.0"
    ]
    # dev names the project's own extras: they come along
    assert wheelhouse.select_requirements(requirements, ["dev"], linux_312, []) == [
        "numba>=0.60", "numpy>=1.24", "pytest>=8", "torch>=2.3", "zarr<3.2,>=3.0"
    ]
    assert wheelhouse.select_requirements(requirements, ["distributed"], linux_312, []) == [
        "dask[distributed]>=2024.1", "numpy>=1.24", "torch>=2.3"
    ]
    assert wheelhouse.with_requirements(["numpy>=1.24", "torch>=2.3"], ["Torch==2.13.0+cpu"]) == [
        "Torch==2.13.0+cpu", "numpy>=1.24"
    ]
    windows = wheelhouse.target_environment("3.12", "win_amd64")
    assert "pywin32" in wheelhouse.select_requirements(requirements, ["train"], windows, [])


def test_target_environment_and_platform_tags() -> None:
    env = wheelhouse.target_environment("3.12", "manylinux2014_aarch64")
    assert (env["python_version"], env["sys_platform"], env["platform_machine"]) == (
        "3.12", "linux", "aarch64"
    )
    assert wheelhouse.target_environment("3.11", "manylinux_2_28_x86_64")["platform_machine"] == (
        "x86_64"
    )
    with pytest.raises(ValueError, match=r"must look like 3\.12"):
        wheelhouse.target_environment("312", "manylinux_2_28_x86_64")
    tags = wheelhouse.expand_platforms(["manylinux_2_28_x86_64"])
    assert tags[0] == "manylinux_2_28_x86_64"
    # matplotlib, for one, ships manylinux2014 (glibc 2.17) wheels only
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert wheelhouse.expand_platforms(["macosx_11_0_arm64"]) == ["macosx_11_0_arm64"]


def test_an_unknown_extra_is_refused() -> None:
    known = {"dev", "train"}
    assert wheelhouse.unknown_extras(["train", "Dev"], known) is None
    assert wheelhouse.unknown_extras(["trian", "dev"], known) == (
        "puicl has no extra trian; its extras: dev, train"
    )


def _local_torch_wheel() -> Path | None:
    """This machine's wheel of the installed torch, in a folder pip's configuration finds
    links in (the wheelhouse takes it from there)."""
    version = torch.__version__
    folders = os.environ.get("PIP_FIND_LINKS", "").split()
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                            capture_output=True, text=True).stdout
    for line in config.splitlines():
        if "find-links" in line:
            folders += line.split("=", 1)[1].strip("'\"").split()
    for folder in folders:
        found = glob.glob(str(Path(folder) / f"torch-{version}-*.whl"))
        if found:
            return Path(found[0])
    return None


def _offline_env() -> dict[str, str]:
    """The environment with no pip configuration: no index, no extra links, no mirror."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.heaviest
@pytest.mark.slow  # ~200 MB of wheels (pip caches them), then a fresh install: 7 min on 2 cores
@pytest.mark.timeout(1800)
def test_offline_install_runs_the_smoke_pipeline(tmp_path) -> None:
    torch_wheel = _local_torch_wheel()
    if torch_wheel is None:
        pytest.skip(f"no local wheel of torch {torch.__version__} to install offline")
    import tomllib

    extras_known = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
        "optional-dependencies", {}
    )
    extras = [e for e in ("prior", "train") if e in extras_known]  # what the pipeline needs
    house = tmp_path / "wheelhouse"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    # torch: the local build of the version installed here (PyPI's would be a CUDA build of
    # several GB), with its own dependencies
    built = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(house), "--python-version", version,
         "--require", f"torch=={torch.__version__}",
         *(["--extras", ",".join(extras)] if extras else [])],
        capture_output=True, text=True, timeout=1200,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert [p.name for p in house.glob("torch-*")] == [torch_wheel.name]

    target = tmp_path / "venv"
    venv.create(target, with_pip=True, system_site_packages=False)
    python = target / "bin" / "python"
    requirement = f"puicl[{','.join(extras)}]" if extras else "puicl"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--find-links", str(house),
         requirement],
        capture_output=True, text=True, timeout=1200, env=_offline_env(),
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    work = tmp_path / "work"  # outside the checkout: only the installed package is importable
    work.mkdir()
    env = {**_offline_env(), "OMP_NUM_THREADS": "1"}

    def run(*command: str) -> str:
        done = subprocess.run([str(target / "bin" / command[0]), *command[1:]], cwd=work,
                              capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
        return done.stdout

    located = run("python", "-c", "import trainer, puicl_model; print(trainer.__file__)")
    assert str(target) in located
    run("prior-gen", "--config", str(SMOKE), "--workers", "1", "--stages", "all",
        "--out", "shards")
    run("prior-gen", "--config", str(SMOKE), "--workers", "1", "--split", "val",
        "--stages", "1,3,tail", "--steps", "0-1", "--out", "shards")
    run("trainer", "train", "--config", str(SMOKE), "--shards", "shards", "--run-dir", "run",
        "--threads", "1")
    run("trainer", "export", "run", "--out", "weights")
    scored = run(
        "python", "-c",
        "import numpy as np\n"
        "from puicl_model import PUICLClassifier\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(60, 4)).astype('float32'); s = np.r_[np.ones(20), np.zeros(40)]\n"
        "p = PUICLClassifier(weights='weights').fit(X, s).predict_proba(X[20:])\n"
        "print(p.shape, bool(np.isfinite(p).all()))",
    )
    assert scored.strip() == "(40, 2) True"
