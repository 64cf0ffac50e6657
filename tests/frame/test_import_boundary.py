"""Inference needs only the core dependencies, and no part imports a part downstream of it.

``pip install puicl`` (no extras) installs torch, numpy, pandas, scikit-learn, scipy,
safetensors, tqdm and pyyaml; the prior generator's, trainer's and benchmark's packages come
with the extras (pyproject.toml). A user scoring a table must never need the others.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# joblib is not among them: scikit-learn itself requires it, so every install has it.
EXTRAS_ONLY = ("zarr", "numcodecs", "webdataset", "numba", "matplotlib", "dask", "pulearn")

SCRIPT = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {EXTRAS_ONLY!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is not installed (blocked by the test)")
            return None

    sys.meta_path.insert(0, Block())
    import numpy as np
    import pandas as pd
    from puicl_model import PUICLClassifier

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 4)), columns=list("abcd"))
    X["colour"] = rng.choice(["red", "green"], size=60)
    s = np.r_[np.ones(20, int), np.zeros(40, int)]
    proba = PUICLClassifier().fit(X, s).predict_proba(X)
    assert proba.shape == (60, 2) and np.isfinite(proba).all()
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(BLOCKED))
    assert not loaded, loaded
    print("ok")
""")


def test_the_classifier_runs_without_the_extras_packages() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


# upstream -> the parts it may import (docs/architecture.md, "Module map")
ALLOWED = {
    "puicl_common": set(),
    "prior_gen": {"puicl_common"},
    "puicl_model": {"puicl_common"},
    "trainer": {"puicl_common", "prior_gen", "puicl_model"},
    "benchmark": {"puicl_common", "puicl_model"},
}


def imported_parts(package: str) -> dict[str, set[str]]:
    """Project packages that each file of ``package`` imports (at any depth in the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = (names & set(ALLOWED)) - {package}
    return found


def test_no_part_imports_a_part_downstream_of_it() -> None:
    offenders = {
        file: sorted(parts - ALLOWED[package])
        for package in ALLOWED
        for file, parts in imported_parts(package).items()
        if parts - ALLOWED[package]
    }
    assert offenders == {}
