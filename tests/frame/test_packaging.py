"""A built wheel holds the five packages and the bundled weights, and nothing of the
repository's tools (``speed/``, ``studies/``, ``scripts/``, ``relay/``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"benchmark", "prior_gen", "puicl_common", "puicl_model", "trainer"}


@pytest.mark.slow  # a wheel build: a few seconds of setuptools
def test_the_wheel_ships_only_the_five_packages(tmp_path) -> None:
    pytest.importorskip("setuptools")
    # a copy of what the build reads, beside the tools it must leave out: an in-tree build
    # would leave build/ behind, and an old build/ would leak into the wheel
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in (*PACKAGES, "speed", "studies", "scripts", "relay"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheels"), str(source)],
        capture_output=True, text=True, timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("puicl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == PACKAGES
    assert "puicl_model/net/weights/model.safetensors" in names


def test_the_citation_file_names_the_package_and_the_paper() -> None:
    import re

    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"', project, re.MULTILINE)
    assert version is not None and citation["version"] == version.group(1)
    assert citation["title"] == "puicl"
    paper = citation["preferred-citation"]
    assert paper["type"] == "article" and "2605.05591" in paper["url"]
    assert [a["family-names"] for a in paper["authors"]] == ["Liu", "Chang", "Cheng", "Tian", "Li"]
