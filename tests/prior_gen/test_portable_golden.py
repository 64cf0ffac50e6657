"""The golden digest: ``prior-gen --config configs/paper.yaml`` (portable arithmetic) writes the
same arrays under every CPU variant this machine can run.

Each variant regenerates a small shard set in a subprocess (the real command) with another
kernel choice of the libraries that pick kernels by CPU:

* OpenBLAS's kernels (``OPENBLAS_CORETYPE``): the machine's default, ``Prescott`` (SSE3) and
  ``Haswell`` (AVX2);
* numpy's SIMD kernels (``NPY_DISABLE_CPU_FEATURES``): every dispatched feature this CPU has
  (AVX2/FMA3 = X86_V3, AVX-512 = X86_V4, ...) masked, so numpy runs its baseline kernels;
* numba's code generation (``NUMBA_CPU_NAME=generic``): the kernels compiled for the baseline
  x86-64 (SSE2, 2 float64 or 4 float32 lanes) instead of this CPU (the first run of that
  variant compiles them, ~1 min; numba caches them after).

The digest below was written on a 2-core AMD EPYC (AVX2, no AVX-512). A machine where it does
not hold, under any variant, generates different data from the same command: that is the bug
this test exists to catch (docs/architecture.md §6, "Determinism"). With the native arithmetic
the same command changes its bytes under ``Prescott`` and under the masked numpy features
(docs/performance.md), so the test is not vacuous.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from prior_gen_testlib import PAPER, REPO

from prior_gen.config import ACTIVATION_NAMES
from prior_gen.shards import open_shards
from puicl_common.configio import load_yaml

# sha256 over the shard set's tasks in training order: x bytes, y bytes, n_labeled (8 bytes LE)
GOLDEN = "226f7cabc7d787bbe9fa760b19ccac443f8e563032c62d8fe9d87a8aabc772ca"
STAGES, STEPS = "1,50,100,tail", "0-2"

# The same command with categorical features and a task-size curriculum on (one step per stage):
# discretisation (a sort, cut positions from exact double products, searchsorted) must be as
# portable as the rest. Written on the same 2-core AMD EPYC.
CATEGORICAL_GOLDEN = "6d11b78133bac18cdb5110ecc1de638ebab4238423e539666934d9d05f2432cb"
CATEGORICAL_CHANGES = {
    "n_labeled": {"start": [50, 100], "end": [100, 300]},
    "categorical": {"share": [0.3, 0.7], "levels": [2, 10], "shuffle_levels": 0.5},
}


def _dispatched_features() -> list[str]:
    """numpy's run-time dispatched CPU features that this CPU has (the newest kernels)."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    return [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]


def _variants() -> dict[str, dict[str, str]]:
    variants = {
        "default": {},
        "openblas-prescott": {"OPENBLAS_CORETYPE": "Prescott"},
        "openblas-haswell": {"OPENBLAS_CORETYPE": "Haswell"},
        "numba-generic": {"NUMBA_CPU_NAME": "generic"},
    }
    features = _dispatched_features()
    if features:
        variants["numpy-baseline"] = {"NPY_DISABLE_CPU_FEATURES": " ".join(features)}
    return variants


VARIANTS = _variants()
# numba compiling for a generic x86-64 CPU recompiles every kernel (~15 s): the full suite
# (CI) runs it, the quick subset (-m "not slow") the others
VARIANT_PARAMS = [
    pytest.param(name, marks=pytest.mark.slow) if name == "numba-generic" else name
    for name in sorted(VARIANTS)
]


def arrays_digest(directory: Path) -> tuple[str, list[dict]]:
    """(sha256 of every stored task's arrays, in training order; the tasks' metadata)."""
    reader = open_shards(directory)
    digest = hashlib.sha256()
    metas = []
    for stage in reader.stages():
        for step in reader.available_steps(stage):
            for task in reader.read_step(stage, step):
                digest.update(task.x.tobytes())
                digest.update(task.y.tobytes())
                digest.update(int(task.n_labeled).to_bytes(8, "little"))
                metas.append(task.meta)
    reader.close()
    return digest.hexdigest(), metas


def generate(
    tmp_path: Path, env: dict[str, str], dataset: dict | None = None, steps: str = STEPS
) -> Path:
    """Run the prior-gen command for the golden shard set under ``env`` (``dataset``: keys
    changed in ``prior.dataset``); return its directory."""
    config = load_yaml(PAPER)
    config["shards"]["steps_per_shard"] = 1  # storage only: not in the config hash
    config["prior"]["dataset"].update(dataset or {})
    config_path = tmp_path / "paper_small_shards.yaml"
    config_path.write_text(yaml.safe_dump(config))
    out = tmp_path / "shards"
    command = [
        sys.executable,
        "-m",
        "prior_gen.cli",
        "--config",
        str(config_path),
        "--stages",
        STAGES,
        "--steps",
        steps,
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    full_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **env}
    result = subprocess.run(command, cwd=REPO, env=full_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


@pytest.mark.parametrize("name", VARIANT_PARAMS)
def test_golden_digest_holds_under_every_cpu_variant(name: str, tmp_path: Path) -> None:
    digest, metas = arrays_digest(generate(tmp_path, VARIANTS[name]))
    assert len(metas) == 4 * 3 * 48
    assert digest == GOLDEN, f"{name}: {digest}"


@pytest.mark.parametrize("name", VARIANT_PARAMS)
def test_categorical_golden_digest_holds_under_every_cpu_variant(name: str, tmp_path: Path) -> None:
    out = generate(tmp_path, VARIANTS[name], CATEGORICAL_CHANGES, steps="0-0")
    digest, metas = arrays_digest(out)
    assert len(metas) == 4 * 48
    assert sum(len(m["categorical_features"]) for m in metas) > 300
    assert digest == CATEGORICAL_GOLDEN, f"{name}: {digest}"


def test_golden_set_exercises_every_function_and_mode(tmp_path: Path) -> None:
    """The digest covers every activation, both SCM kinds and both cause distributions."""
    _, metas = arrays_digest(generate(tmp_path, {}))
    assert {name for m in metas for name in m["activations"]} == set(ACTIVATION_NAMES)
    assert {m["causal"] for m in metas} == {True, False}
    assert {m["cause_dist"] for m in metas} == {"normal", "uniform"}
    assert all(np.isfinite(m["realized_pi"]) for m in metas)
