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
    # nor torch._dynamo, seconds of every process's start that only torch.compile needs
    assert "torch._dynamo" not in sys.modules
    print("ok")
""")


def test_the_classifier_runs_without_the_extras_packages_or_the_compiler() -> None:
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


# puicl_model's wings, lowest first: a module imports its own wing and the wings below it
WINGS = ("net", "passes", "estimator", "files")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports for annotations only,
    never run."""
    return {id(inner) for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                        "typing.TYPE_CHECKING")
            for statement in node.body for inner in ast.walk(statement)}


def model_import_graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """puicl_model's modules -> the puicl_model modules each imports (at any depth; with
    ``runtime_only``, less the imports under ``if TYPE_CHECKING:``)."""
    modules = {_module_name(path): path for path in sorted((ROOT / "puicl_model").rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_only(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {target for target in targets if target in modules} - {name}
    return graph


def _wing(module: str) -> int | None:
    parts = module.split(".")
    return WINGS.index(parts[1]) if len(parts) > 1 and parts[1] in WINGS else None


def test_no_wing_of_the_model_imports_a_wing_above_it() -> None:
    upward = sorted(f"{source} -> {target}"
                    for source, targets in model_import_graph().items()
                    for target in targets
                    if _wing(source) is not None and _wing(target) is not None
                    and _wing(target) > _wing(source))
    assert upward == []


def test_the_model_package_has_no_import_circle() -> None:
    # an import that runs; a type named in an annotation only (``if TYPE_CHECKING:``) may point
    # back along a circle, as no wing may be imported upward even for a type (above)
    graph = model_import_graph(runtime_only=True)
    # the package's __init__ files name their wing's modules; only module-to-module imports count
    graph = {name: {t for t in targets if not (ROOT / t.replace(".", "/")).is_dir()}
             for name, targets in graph.items()
             if not (ROOT / name.replace(".", "/")).is_dir()}
    state: dict[str, int] = {}
    circle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                circle.extend([*path[path.index(target):], target] if target in path
                              else [node, target])
                return True
            if state.get(target) is None and visit(target, [*path, target]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if state.get(start) is None and visit(start, [start]):
            break
    assert circle == []


def test_the_model_package_reads_in_modules_and_functions_of_bounded_size() -> None:
    # a module over 450 lines, or a function over 100, has grown two jobs
    too_long = []
    for path in sorted((ROOT / "puicl_model").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        if text.count("\n") > 450:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 100:
                    too_long.append(f"{name}: {node.name} is {length} lines")
    assert too_long == []
