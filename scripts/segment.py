"""The two pieces of ``scripts/train_segment.sh`` that read a run: what a segment needs, and the
resumable state to commit after it.

    python scripts/segment.py plan CONFIG RUN_DIR SHARDS MINUTES
        line 1: the step the segment trains until (at most MINUTES at STEPS_PER_MINUTE, by
        default the run's last logged speed, else 60, plus a 20 % margin); then the
        ``prior-gen`` commands that write exactly the steps it reads (the trainer's own
        ``needed_steps`` under the run's sampler), and the validation split when the config
        validates during training.
    python scripts/segment.py save RUN_DIR SAVED_DIR
        copies the run's newest checkpoint alone (with an index that lists only it), its
        config and metrics to SAVED_DIR, replacing all but its segment scores; prints the
        checkpoint's step.
    python scripts/segment.py record SAVED_DIR REFERENCE_JSON
        appends a segment's scores on the two yardsticks (``recipe_sweep.py --reference``'s
        reference.json) to SAVED_DIR/scores.jsonl, with the step and the training minutes
        so far, so that the run's curve is committed with its state (docs/model_card.md).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

from trainer.checkpoint import CHECKPOINT_FORMAT, CheckpointStore
from trainer.config import load_run_config
from trainer.metrics_log import read_metrics
from trainer.sampler import StepSampler
from trainer.shard_check import generate_commands, needed_steps

SPEED_MARGIN = 1.2  # the segment may run a little faster than the run's last logged speed
DEFAULT_STEPS_PER_MINUTE = 60.0  # a new run: about a 64-wide model on 2 cores
RECENT_LOG_LINES = 20
SCORES = "scores.jsonl"  # one line per scored segment; kept across saves


def steps_per_minute(run: Path, tasks_per_step: int) -> float:
    if os.environ.get("STEPS_PER_MINUTE"):
        return float(os.environ["STEPS_PER_MINUTE"])
    metrics = run / "metrics.jsonl"
    if not metrics.exists():
        return DEFAULT_STEPS_PER_MINUTE
    rates = [rate for record in read_metrics(metrics) if (rate := record.get("tasks_per_s"))]
    recent = rates[-RECENT_LOG_LINES:]
    return sum(recent) / len(recent) * 60 / tasks_per_step if recent else DEFAULT_STEPS_PER_MINUTE


def plan(config_path: Path, run: Path, shards: Path, minutes: float) -> list[str]:
    config = load_run_config(config_path)
    entries = CheckpointStore(run / "checkpoints").entries()
    start = entries[-1]["step"] if entries else 0
    reach = math.ceil(minutes * steps_per_minute(run, config.curriculum.global_batch)
                      * SPEED_MARGIN)
    until = min(config.curriculum.total_steps, start + reach + 1)
    sampler = StepSampler(config.training.sampler, config.curriculum, config.seed)
    lines = [str(until)]
    if until > start:
        lines += generate_commands(needed_steps(sampler, start, until), config_path, shards,
                                   "train")
    validation = config.validation
    if validation.every_steps > 0:
        needed = {stage: list(range(validation.steps_per_stage)) for stage in validation.stages}
        lines += generate_commands(needed, config_path, shards, "val")
    return lines


def save(run: Path, saved: Path) -> int:
    newest = CheckpointStore(run / "checkpoints").entries()[-1]
    staging = saved.with_name(saved.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "checkpoints").mkdir(parents=True)
    for name in ("config.yaml", "metrics.jsonl"):
        shutil.copy2(run / name, staging / name)
    if (saved / SCORES).exists():
        shutil.copy2(saved / SCORES, staging / SCORES)
    shutil.copy2(run / "checkpoints" / newest["file"], staging / "checkpoints" / newest["file"])
    index = {"format": CHECKPOINT_FORMAT, "checkpoints": [newest]}
    (staging / "checkpoints" / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    shutil.rmtree(saved, ignore_errors=True)
    staging.rename(saved)
    return int(newest["step"])


def training_minutes(metrics: Path, until_step: int) -> float:
    """Wall-clock minutes of training up to ``until_step``, from the logged throughput: each
    train record covers the steps since the previous one (or since its segment's start event)
    at its ``tasks_per_s``."""
    spans: dict[int, float] = {}
    previous = 0
    for record in read_metrics(metrics):
        if record.get("kind") == "event" and record.get("event") == "start":
            previous = int(record["step"])
        elif record.get("kind") == "train" and record["step"] <= until_step:
            steps = record["step"] - previous
            spans[record["step"]] = steps / record["tasks_per_s"]
            previous = record["step"]
    tasks_per_step = load_run_config(metrics.parent / "config.yaml").curriculum.global_batch
    return sum(spans.values()) * tasks_per_step / 60


def record(saved: Path, reference: Path) -> dict:
    scores = json.loads(reference.read_text())
    named = re.search(r"_step(\d+)$", scores["variant"])
    newest = CheckpointStore(saved / "checkpoints").entries()[-1]["step"]
    if named is None or int(named.group(1)) > newest:
        raise SystemExit(f"error: {reference} scores '{scores['variant']}', not a step "
                         f"<= {newest} of the run saved in {saved}")
    step = int(named.group(1))
    line = {"step": step,
            "training_minutes": round(training_minutes(saved / "metrics.jsonl", step), 2),
            **{key: scores[key] for key in ("val_auc", "val_accuracy", "val_loss", "bench_auc",
                                            "bench_per_dataset", "cpu", "date", "weights")}}
    path = saved / SCORES
    kept = read_metrics(path) if path.exists() else []
    kept = [old for old in kept if old["step"] != line["step"]] + [line]
    kept.sort(key=lambda old: old["step"])
    staging = path.with_name(SCORES + ".tmp")
    staging.write_text("".join(json.dumps(old) + "\n" for old in kept))
    staging.replace(path)
    return line


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[0] == "plan":
        print("\n".join(plan(Path(argv[1]), Path(argv[2]), Path(argv[3]), float(argv[4]))))
        return 0
    if len(argv) == 3 and argv[0] == "save":
        print(save(Path(argv[1]), Path(argv[2])))
        return 0
    if len(argv) == 3 and argv[0] == "record":
        line = record(Path(argv[1]), Path(argv[2]))
        print(f"step {line['step']}: val AUC {line['val_auc']:.4f}, dev AUC "
              f"{line['bench_auc']:.4f} after {line['training_minutes']:.0f} training minutes")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
