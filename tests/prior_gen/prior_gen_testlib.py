"""Shared helpers of the prior-generator tests: small configs, shard-directory digests and the
project's scripts as modules.

Imported by name: pytest puts this directory on the path (``pythonpath`` in pyproject.toml;
the suite runs with --import-mode=importlib, which does not).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from prior_gen.config import GenerationConfig, generation_config_from_mapping
from puicl_common.configio import load_yaml

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "smoke.yaml"
PAPER = REPO / "configs" / "paper.yaml"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _merge(base: Any, update: Any) -> Any:
    if isinstance(base, dict) and isinstance(update, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in update.items()}}
    return update


def tiny_config(**sections: Any) -> GenerationConfig:
    """The smoke config with ``sections`` deep-merged into it."""
    return generation_config_from_mapping(_merge(load_yaml(SMOKE), sections))


def with_format(config: GenerationConfig, fmt: str) -> GenerationConfig:
    return dataclasses.replace(config, shards=dataclasses.replace(config.shards, format=fmt))


def shard_digests(directory: Path, split: str = "train") -> dict[str, str]:
    """{relative path: sha256} of every shard listed in the manifest (checked against disk)."""
    from prior_gen.shards.storage import digest_path

    manifest = json.loads((directory / "manifest.json").read_text())
    digests = {}
    for shards in manifest["splits"][split].values():
        for record in shards.values():
            on_disk = digest_path(directory / record["path"])[0]
            assert on_disk == record["sha256"], record["path"]
            digests[record["path"]] = on_disk
    return digests


def data_digest(tasks) -> str:
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(task.x.tobytes())
        digest.update(task.y.tobytes())
        digest.update(json.dumps(task.meta, sort_keys=True).encode())
    return digest.hexdigest()


def digests_under_cpu_variant(config_path: Path, out: Path, variant_env: dict[str, str],
                              stages: str = "1,tail") -> dict[str, str]:
    """Generate ``config_path``'s train shards with the real command in a subprocess whose
    environment picks other CPU kernels (``test_portable_golden.VARIANTS``); their digests."""
    command = [sys.executable, "-m", "prior_gen.cli", "--config", str(config_path), "--stages",
               stages, "--workers", "1", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **variant_env}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return shard_digests(out)
