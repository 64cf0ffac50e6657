"""Scores of a committed state: its EMA weights on the recipe study's two yardsticks
(docs/recipe.md, "Yardsticks").

* the fixed synthetic validation split of the paper's prior (``configs/paper.yaml``, stages
  1, 50, 100 and the tail, 48 tasks each), scored as ``studies/recipe_sweep.py --reference``
  scores it: step 0 of each validation stage of ``val_config`` (``configs/paper.yaml`` unless
  a test names a smaller one). For the paper's run these are the run's own validation shards,
  which a segment generates anyway;
* the development suite, ``puicl-bench --suite dev --methods puicl`` at π = 0.2, 0.5 and 0.8,
  with the model alone (``portfolio: none``: the run's model, not the portfolio beside it).

A segment scores the state it starts from (the previous segment's committed state), in a
subprocess of low priority on the host's cores while the GPU trains, so that no GPU time
waits for the scores: ``python -m relay.scoring WEIGHTS OUT_JSON ...`` writes the validation
scores, then adds the suite's. The weights scored are committed bytes, exported alike on any
machine, so every score can be checked without a GPU; ``python -m relay score FOLDER`` scores
the newest committed state (the last one of a run, which no later segment starts from).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from relay.shards import ShardQueue
from trainer.config import RunConfig, load_run_config

ROOT = Path(__file__).resolve().parents[1]
PAPER_CONFIG = ROOT / "configs" / "paper.yaml"
DEV_SETTINGS = {"portfolio": "none"}
NICE = 10  # below the trainer and prior-gen, which the GPU waits on


@dataclass(frozen=True)
class FixedVal:
    """Where the fixed validation split is, which stages it scores, and the generation job
    that writes it."""

    directory: Path
    stages: tuple
    ticket: int


def queue_fixed_val(shards: ShardQueue, val_config: Path, run_config: RunConfig,
                    work: Path, run_val_ticket: int | None) -> FixedVal:
    """Step 0 of each validation stage of ``val_config``: the run's own validation shards
    (written by ``run_val_ticket``) when the run draws its data as ``val_config`` does, else
    queued for generation into ``work/fixed_val``."""
    config = load_run_config(val_config)
    stages = tuple(config.validation.stages)
    if run_val_ticket is not None \
            and config.generation().hash() == run_config.generation().hash() \
            and set(stages) <= set(run_config.validation.stages):
        return FixedVal(shards.shards, stages, run_val_ticket)
    out = work / "fixed_val"
    ticket = shards.add("val", {stage: [0] for stage in stages}, "the fixed validation split",
                        config=val_config, out=out)
    return FixedVal(out, stages, ticket)


def export_weights(run_dir: Path, step: int, out: Path) -> str:
    """Write the EMA weights of the run's checkpoint of ``step`` to ``out``; returns the
    sha256 of the written ``model.safetensors``."""
    from puicl_model.net.weights import save_weights
    from trainer.export import exported_model

    model, _ = exported_model(run_dir, step)
    save_weights(model, out)
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def validation_scores(weights: Path, fixed_val: Path, stages: tuple) -> dict[str, Any]:
    """The recipe study's validation AUC, accuracy and loss of the weights."""
    from prior_gen.shards import open_shards
    from puicl_model.net.weights import load_weights
    from studies.recipe_sweep import val_scores

    reader = open_shards(fixed_val, "val")
    tasks = [task for stage in stages for task in reader.read_step(stage, 0)]
    return {key: _finite(value) for key, value in val_scores(load_weights(weights),
                                                             tasks).items()}


def _finite(value: float) -> float | None:
    """``value`` rounded, or None for NaN (a one-table suite has no standard error): the
    record is strict JSON."""
    return round(value, 6) if math.isfinite(value) else None


def dev_suite_scores(weights: Path, where: Path, repeats: int, jobs: int,
                     datasets: str | None = None) -> dict[str, Any]:
    """The development suite's figure with the model alone; ``datasets`` (a test's) scores a
    part of it, whose figure is then not the suite's."""
    import pandas as pd

    from benchmark.summary import suite_figure

    where.mkdir(parents=True, exist_ok=True)
    settings_path = where / "dev_settings.yaml"
    settings_path.write_text(yaml.safe_dump({"puicl": DEV_SETTINGS}))
    command = [sys.executable, "-m", "benchmark.cli", "--suite", "dev", "--methods", "puicl",
               "--weights", str(weights), "--repeats", str(repeats), "--jobs", str(jobs),
               "--out", str(where / "dev_suite"), "--no-progress", "--method-config",
               str(settings_path), *(["--datasets", datasets] if datasets else [])]
    with (where / "dev_suite.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        lines = (where / "dev_suite.log").read_text(errors="replace").strip().splitlines()
        raise RuntimeError(f"puicl-bench failed: {lines[-1] if lines else done.returncode}")
    per_table = pd.read_csv(where / "dev_suite" / "per_table.csv")
    mean, se = suite_figure(per_table, "puicl")
    by_pi = per_table.groupby("pi_target")["auc"].mean()
    by_table = per_table.groupby("dataset")["auc"].mean()
    return {"dev_auc": _finite(mean), "dev_se": _finite(se),
            "dev_by_pi": {f"{pi:g}": round(float(v), 4) for pi, v in by_pi.items()},
            "dev_per_table": {k: round(float(v), 4) for k, v in by_table.items()},
            "dev_repeats": repeats, "dev_settings": DEV_SETTINGS,
            **({"dev_datasets": datasets} if datasets else {})}


def _write(path: Path, scores: dict[str, Any]) -> None:
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(json.dumps(scores))
    staging.replace(path)


def score(weights: Path, out: Path, fixed_val: Path, stages: tuple, dev_repeats: int,
          dev_jobs: int, dev_datasets: str | None = None) -> dict[str, Any]:
    """Both yardsticks; ``out`` holds the validation scores as soon as they are known."""
    scores: dict[str, Any] = validation_scores(weights, fixed_val, stages)
    _write(out, scores)
    if dev_repeats > 0:
        try:
            scores.update(dev_suite_scores(weights, out.parent / "scores", dev_repeats,
                                           dev_jobs, dev_datasets))
        except RuntimeError as err:
            scores.update(dev_auc=None, dev_status=str(err))
        _write(out, scores)
    return scores


class Scorer:
    """``python -m relay.scoring`` in a process group of its own, at low priority."""

    def __init__(self, weights: Path, out: Path, fixed_val: FixedVal, dev_repeats: int,
                 dev_jobs: int, dev_datasets: str | None = None) -> None:
        self.out = out
        out.unlink(missing_ok=True)
        command = [sys.executable, "-m", "relay.scoring", str(weights), str(out),
                   "--fixed-val", str(fixed_val.directory),
                   "--stages", ",".join(map(str, fixed_val.stages)),
                   "--dev-repeats", str(dev_repeats), "--dev-jobs", str(dev_jobs),
                   *(["--dev-datasets", dev_datasets] if dev_datasets else [])]
        self.log = out.with_suffix(".log")
        if shutil.which("nice"):
            command = ["nice", "-n", str(NICE), *command]  # nice execs: the same process
        with self.log.open("w") as handle:
            self.process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def finish(self, deadline: float | None) -> dict[str, Any]:
        """What it scored by ``deadline``; the suite's figure is None, with a status, when
        the time ran out or it failed."""
        while self.process.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                self.stop()
                break
            time.sleep(0.5)
        scores = json.loads(self.out.read_text()) if self.out.exists() else {}
        if "dev_auc" not in scores:
            lines = self.log.read_text(errors="replace").strip().splitlines()
            status = "out of time" if self.process.returncode in (None, -signal.SIGTERM) \
                else f"failed: {lines[-1] if lines else self.process.returncode}"
            scores.update(dev_auc=None, dev_status=status)
        return scores

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m relay.scoring",
                                     description="score exported weights on both yardsticks")
    parser.add_argument("weights", type=Path)
    parser.add_argument("out", type=Path, help="JSON file of the scores")
    parser.add_argument("--fixed-val", type=Path, required=True)
    parser.add_argument("--stages", required=True, help="e.g. 1,50,100,tail")
    parser.add_argument("--dev-repeats", type=int, default=2)
    parser.add_argument("--dev-jobs", type=int, default=1)
    parser.add_argument("--dev-datasets", default=None)
    args = parser.parse_args(argv)
    stages = tuple(s if s == "tail" else int(s) for s in args.stages.split(","))
    score(args.weights, args.out, args.fixed_val, stages, args.dev_repeats, args.dev_jobs,
          args.dev_datasets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
