"""The examples of docs/classifier.md run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "classifier.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.mark.slow
def test_python_and_shell_examples_run() -> None:
    namespace: dict = {}
    for code in blocks("python"):
        exec(compile(code, str(GUIDE), "exec"), namespace)
    # the wide example: 3 feature groups x 1 shared context, or x 3 chunks
    assert (namespace["clf"].n_passes_, namespace["chunked"].n_passes_) == (3, 9)
    assert namespace["ensemble"].n_passes_ == 3  # the ensemble example: one pass per member
    script = re.sub(r"^python ", f"{sys.executable} ", blocks("bash")[-1], flags=re.M)
    script = re.sub(r"^puicl ", f"{sys.executable} -m puicl_model.files.cli ", script, flags=re.M)
    done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3] == "row,p_positive,label"


README = GUIDE.parents[1] / "README.md"


def test_the_examples_write_to_folders_of_their_own() -> None:
    """No fixed path in the system's temporary folder, which other users share: the examples
    make their own (tempfile.mkdtemp, mktemp -d)."""
    for page in (GUIDE, README):
        assert "/tmp/" not in page.read_text(encoding="utf-8"), page.name
    assert "tempfile.mkdtemp(" in blocks("python")[0]
    assert blocks("bash")[-1].startswith("work=$(mktemp -d)\n")


def test_readme_example_runs_and_ranks_well() -> None:
    """The README's first-screen example, as written, with the bundled model."""
    code = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[0]
    assert len(code.strip().splitlines()) <= 6
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    from sklearn.metrics import roc_auc_score

    s, y, p = namespace["s"], namespace["y"], namespace["p"]
    assert p.shape == ((~s).sum(),)
    assert roc_auc_score(y[~s], p) > 0.95  # the model card's WDBC AUC is 0.990


def test_readme_keeps_its_two_commands_and_ci_runs_the_second() -> None:
    text = README.read_text(encoding="utf-8")
    setup = (
        'python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && '
        '.venv/bin/pip install -e ".[dev]"'
    )
    assert f"{setup} && bash examples/smoke_pipeline.sh\n" in text
    suite = ".venv/bin/python -m pytest -q -n 2 --dist worksteal"
    tests = f".venv/bin/python -m ruff check . && {suite}"
    assert f"{setup} && {tests}\n" in text
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert f".venv/bin/python -m ruff check .\n{suite}\n" in ci
    # the benchmark command runs as written: no placeholder left for the reader to fill in
    assert "--weights PATH" not in text.split("```bash")[-1].split("```")[0]


def test_the_main_job_prints_the_bundled_models_result_last_and_labelled(monkeypatch,
                                                                        capsys) -> None:
    import runpy

    script = (README.parent / "examples" / "smoke_pipeline.sh").read_text(encoding="utf-8")
    runs = [line for line in script.splitlines() if "examples/quickstart.py" in line]
    assert "--weights" in runs[0] and "smoke model" in runs[0]
    assert runs[-1].endswith('examples/quickstart.py --name "bundled model"')
    assert script.rstrip().endswith(runs[-1])
    quickstart = README.parent / "examples" / "quickstart.py"
    monkeypatch.setattr(sys, "argv", [str(quickstart), "--name", "bundled model"])
    runpy.run_path(str(quickstart), run_name="__main__")
    assert capsys.readouterr().out.splitlines()[-1].startswith("bundled model: AUC 0.9")


def test_the_dask_recipe_listens_on_this_machine_only() -> None:
    recipe = next(block for block in blocks("bash") if "dask scheduler" in block)
    for command in ("dask scheduler", "dask worker"):
        line = next(line for line in recipe.replace("\\\n", " ").splitlines()
                    if line.startswith(command))
        assert "--host 127.0.0.1" in line and "--dashboard-address 127.0.0.1:" in line, line
