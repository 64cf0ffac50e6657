"""``speed/gpu_check.sh`` runs through on CPU (``DEVICE=cpu``, the smoke config): a GPU is lent
only by chance and for minutes, so the script must be known to work before one is at hand.

Its verdicts are real on CPU too: two identical runs, a resumed one and one by two processes
must come out IDENTICAL, every way to run a step must report its speed at every stage and be
the same run to run, every attention backend must train and report its speed, and the kernel
table and the profile must print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile

import pytest

from .conftest import ROOT


@pytest.mark.slow
@pytest.mark.heaviest
def test_the_gpu_check_runs_through_on_cpu(tmp_path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "DEVICE": "cpu", "PYTHON": sys.executable,
           "WORK": str(tmp_path / "work"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(ROOT / "speed" / "gpu_check.sh"), str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    log = (out / "log.txt").read_text()
    assert "Traceback" not in log, log[-3000:]
    assert re.search(r"tests exit 0: \d+ passed", log)
    verdicts = re.findall(r"runs/(det_b|det_resumed|two_processes) vs \S+: (IDENTICAL|DIFFERENT)",
                          log)
    assert verdicts == [("det_b", "IDENTICAL"), ("det_resumed", "IDENTICAL"),
                        ("two_processes", "IDENTICAL")], log[-3000:]
    assert re.search(r"runs/two_processes: [\d.]+ tasks/s .*data wait", log)
    for stage in (1, 2, 3):  # each variant at each stage, the same run to run
        for variant in ("ddp", "units", "padded"):
            assert re.search(rf"stage {stage}, {variant}: [\d.]+ tasks/s \(\d+ steps of the "
                             r"second pass, the first [\d.]+ s\), run to run IDENTICAL", log), \
                (stage, variant)
        assert f"stage {stage}, graphs: skipped (CUDA graphs need a GPU)" in log
    assert re.search(r"\| padded \| [\d.]+ \| [\d.]+ \| [\d.]+ \| IDENTICAL \|", log)
    # on a CPU the fills' key changes nothing: all three runs are the same
    assert re.search(r"runs/nofill_b vs \S+: IDENTICAL", log)
    assert re.search(r"runs/det_a vs \S+nofill: IDENTICAL", log)
    assert re.search(r"runs/nofill: [\d.]+ tasks/s", log)
    places = re.findall(r"block \d+, shift \d+: (INVARIANT|DEPENDS ON PLACE)", log)
    assert places and set(places) == {"INVARIANT"}, log[-3000:]
    for run in ("det_a", "matmul_nondet", "bucketed_det", "bucketed_nondet"):
        assert re.search(rf"runs/{run}: [\d.]+ tasks/s .*data wait", log), run
    assert "attention bucketed_matmul" in log
    assert re.search(r"features\s+products\s+[\d.]+\s+[\d.]+", log)
    assert log.count("attention share of the self CPU time") == 2
    assert re.search(r"cpu: 1200 pool rows .* two fits IDENTICAL", log)
    assert re.search(r"\| 1,500 × 5 \(150\) \| [\d.]+ \| [\d.]+ \|", log)  # the cost table
    assert re.search(r"bagged, 2 thread\(s\)\s+[\d.]+ ms", log)  # the learners alone
    assert re.search(r"default, learners beside\s+[\d.]+ ms", log)
    assert re.search(r"default, sklearn logistic\s+[\d.]+ ms", log)  # the direct fits' gain
    assert re.search(r"logistic, 2, sklearn fit\s+[\d.]+ ms", log)
    assert re.search(r"model alone, weights reread\s+[\d.]+ ms", log)
    assert re.search(r"× the model alone: default [\d.]+, ", log)
    assert log.rstrip().endswith("done")
    with tarfile.open(out / "runs.tar.gz") as archive:
        names = archive.getnames()
    assert "./det_a/metrics.jsonl" in names
    assert not any("checkpoints" in name for name in names)
