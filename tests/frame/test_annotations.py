"""The code says what it takes, and reads in pieces of bounded size.

A parameter that always holds one of the project's own objects (the classifier, its fitted
scorer, a portfolio, a pass planner, a view, the model) is annotated with that class, not
``Any``: ``Any`` is for what a user passes in (tables, labels, values of any kind). Where the
import would run in a circle, or upward across the wings, the class is imported under ``if
TYPE_CHECKING:`` (test_import_boundary.py). No type checker runs over the project, so a test
also resolves every annotation of ``puicl_model``: a name that does not exist is caught here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# parameters that always hold a project object (or a union of a few): never ``Any``
PROJECT_VALUES = frozenset({
    "classifier", "clf", "estimator", "scorer", "fitted", "table", "portfolio", "choice",
    "planner", "planners", "view", "views", "model", "preprocessor", "encoder", "source",
    "batch", "config", "device", "runtime", "keep_columns",
})


def _mentions_any(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body  # a quoted annotation
    return any((isinstance(node, ast.Name) and node.id == "Any")
               or (isinstance(node, ast.Attribute) and node.attr == "Any")
               for node in ast.walk(annotation))


def any_typed_project_values(source: str, name: str) -> list[str]:
    """``name:line function(parameter: annotation)`` for each parameter of PROJECT_VALUES
    whose annotation names ``Any`` in the module text ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                             *(a for a in (arguments.vararg, arguments.kwarg) if a)):
                if (argument.arg in PROJECT_VALUES and argument.annotation is not None
                        and _mentions_any(argument.annotation)):
                    found.append(f"{name}:{node.lineno} {node.name}({argument.arg}: "
                                 f"{ast.unparse(argument.annotation)})")
    return found


def test_the_check_sees_any_however_it_is_written() -> None:
    source = textwrap.dedent("""
        def f(classifier: Any, X: Any, *, views: list[Any] = (), model: typing.Any = None):
            def inner(scorer: "Any | None") -> None: ...
        class C:
            def g(self, portfolio: Portfolio, planner: PassPlanner | None) -> Any: ...
    """)
    assert [line.split(" ", 1)[1] for line in any_typed_project_values(source, "m")] == [
        "f(classifier: Any)", "f(views: list[Any])", "f(model: typing.Any)",
        "inner(scorer: 'Any | None')"]


def test_no_project_object_is_typed_any() -> None:
    found, typed = [], 0
    for path in sorted((ROOT / "puicl_model").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found += any_typed_project_values(text, str(path.relative_to(ROOT)))
        typed += sum(1 for node in ast.walk(ast.parse(text))
                     if isinstance(node, ast.arg) and node.arg in PROJECT_VALUES)
    assert typed > 100  # the walk reads the package's parameters
    assert found == []


# every module of puicl_model imported, its ``if TYPE_CHECKING:`` blocks run (in a process of
# its own: the modules' namespaces are changed), then every annotation of a function evaluated
RESOLVE = textwrap.dedent("""
    import ast, importlib, pathlib
    modules = {}
    for path in sorted(pathlib.Path("puicl_model").rglob("*.py")):
        parts = path.with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[path] = (importlib.import_module(name), ast.parse(path.read_text("utf-8")))
    blocks = [(path, node) for path, (_, tree) in modules.items() for node in tree.body
              if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    for _ in range(len(blocks) + 1):  # a block may import a name another block defines
        failed = []
        for path, node in blocks:
            code = compile(ast.Module(body=node.body, type_ignores=[]), str(path), "exec")
            try:
                exec(code, vars(modules[path][0]))
            except ImportError:
                failed.append((path, node))
        blocks = failed
    unresolved = [str(path) for path, _ in blocks]
    for path, (module, tree) in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [*a.posonlyargs, *a.args, *a.kwonlyargs,
                         *(v for v in (a.vararg, a.kwarg) if v)]
                annotations = [x.annotation for x in names if x.annotation is not None]
                annotations += [node.returns] if node.returns is not None else []
                for annotation in annotations:
                    try:
                        eval(ast.unparse(annotation), dict(vars(module)))
                    except Exception as err:
                        unresolved.append(f"{path}:{node.lineno} {node.name}: "
                                          f"{ast.unparse(annotation)} ({err})")
    print(unresolved)
""")


def test_every_annotation_of_the_model_package_names_something() -> None:
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


# a module over 450 lines, or a function over 100, has grown two jobs
PACKAGES = ("puicl_model", "puicl_common", "prior_gen", "trainer", "benchmark")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 100


def test_every_module_and_function_is_of_bounded_size() -> None:
    too_long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            name = path.relative_to(ROOT).as_posix()
            lines = text.count("\n")
            if lines > MAX_MODULE_LINES:
                too_long.append(f"{name}: {lines} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        too_long.append(f"{name}: {node.name} is {length} lines")
    assert too_long == []
