"""``python trainer/main.py`` (and torchrun of it) runs with trainer/ first on the module path,
as Python does for any script: a module there named like a top-level module would replace it."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

TRAINER = Path(__file__).resolve().parents[2] / "trainer"


def test_no_trainer_module_shadows_a_top_level_module() -> None:
    importable = set(sys.stdlib_module_names) | {
        module.name for module in pkgutil.iter_modules()
        if Path(getattr(module.module_finder, "path", "")).resolve() != TRAINER}
    ours = {path.stem for path in TRAINER.glob("*.py")} - {"__init__"}
    assert ours & importable == set()


def test_the_script_runs_from_any_folder(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(TRAINER / "main.py"), "--help"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--config" in done.stdout
