"""The examples of docs/classifier.md run as written (with temporary paths)."""

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
def test_python_and_shell_examples_run(tmp_path) -> None:
    namespace: dict = {}
    for code in blocks("python"):
        exec(compile(code.replace("/tmp/", f"{tmp_path}/"), str(GUIDE), "exec"), namespace)
    assert namespace["clf"].n_passes_ == 9  # the wide example: 3 feature groups x 3 chunks
    script = blocks("bash")[-1].replace("/tmp/", f"{tmp_path}/")
    script = script.replace("python - <<", f"{sys.executable} - <<")
    script = re.sub(r"^puicl ", f"{sys.executable} -m puicl_model.cli ", script, flags=re.M)
    done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3] == "row,p_positive,label"
