"""Reading the record: a segment's line in words, the record as a table, and the newest
committed state scored on any machine (``python -m relay score``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from puicl_common.atomic import atomic_write_text
from relay import folder as run_folder
from relay import scoring
from relay.digest import code_digest
from relay.machine import cpu_model
from relay.shards import ShardQueue
from relay.training import place_checkpoint
from trainer.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


def _figure(value: Any, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def line_summary(line: dict[str, Any]) -> str:
    """One segment's line in one sentence."""
    replay = line["replay"]["verdict"]
    if line["replay"].get("reason"):
        replay += f" ({line['replay']['reason']})"
    if not line["continued"]:
        return f"replay {replay}; nothing trained or committed"
    trained, committed = line["trained"], line["committed"]
    return (f"steps {trained['first_step']}..{trained['last_step']} on "
            f"{line['machine']['kind']} at {trained['tasks_per_s']} tasks/s (data wait "
            f"{_figure(trained['data_wait_share'], 3)}); replay {replay}; committed step "
            f"{committed['step']} ({committed['packed_bytes'] / 1e6:.1f} MB in "
            f"{committed['parts']} part(s)); {line['wall_s'].get('total', '?')} s")


def table(folder: Path) -> str:
    """The record as a markdown table with the scores of each committed state, and whether
    this tree's training code is the newest segment's (if not, the GPU check comes first)."""
    settings = run_folder.read_settings(folder)
    lines = run_folder.read_record(folder / run_folder.RECORD)
    scores = {s["step"]: s for s in run_folder.read_scores(folder / run_folder.SCORES)}
    rows = ["| segment | date | machine | new steps | tasks/s | data wait | replay | committed "
            "| its val AUC | its dev AUC | wall s |",
            "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for line in lines:
        trained = line.get("trained") or {}
        steps = f"{trained['first_step']}..{trained['last_step']}" if trained else "–"
        replay = line["replay"]["verdict"] + (f": {line['replay']['reason']}"
                                              if line["replay"].get("reason") else "")
        committed = (line.get("committed") or {}).get("step")
        scored = scores.get(committed, {})
        rows.append(f"| {line['segment']} | {line['date'][:10]} | {line['machine']['kind']} "
                    f"| {steps} | {trained.get('tasks_per_s', '–')} | "
                    f"{_figure(trained.get('data_wait_share'), 3)} | {replay} | "
                    f"{'–' if committed is None else committed} | "
                    f"{_figure(scored.get('val_auc'))} | {_figure(scored.get('dev_auc'))} | "
                    f"{line['wall_s'].get('total', '–')} |")
    newest = run_folder.newest_state_line(lines)
    step = newest["end"]["step"] if newest else 0
    status = [f"{folder}: the run of {settings['source_config']} is at step {step} of "
              f"{settings['total_steps']}."]
    if newest and newest["code_sha256"] != code_digest(ROOT):
        status.append("The training code in this tree differs from the newest segment's: run "
                      "speed/gpu_check.sh on a GPU before the next segment.")
    return "\n".join([*status, "", *rows])


def score_committed(folder: Path, work: Path, dev_repeats: int, write: bool,
                    val_config: Path = scoring.PAPER_CONFIG) -> dict[str, Any]:
    """The newest committed state's EMA weights on both yardsticks, on this machine; with
    ``write``, added to the folder's scores unless its step is scored already."""
    lines = run_folder.read_record(folder / run_folder.RECORD)
    newest = run_folder.newest_state_line(lines)
    unpacked = run_folder.check_state(folder, newest)
    if unpacked is None:
        raise run_folder.FolderError(f"{folder} has no committed state yet")
    manifest, data = unpacked
    step = manifest["step"]
    place_checkpoint(data, step, work / "committed")
    digest = scoring.export_weights(work / "committed", step, work / "weights")
    run_config = load_run_config(folder / run_folder.CONFIG)
    queue = ShardQueue(folder / run_folder.CONFIG, work / "shards", 2, work / "prior-gen.log")
    try:  # the run's validation shards are not on this machine: the fixed split on its own
        fixed_val = scoring.queue_fixed_val(queue, val_config, run_config, work, None)
        queue.wait(fixed_val.ticket)
    finally:
        queue.close()
    jobs = max(1, (os.cpu_count() or 2) - 1)
    scores = {"step": step, "segment": newest["segment"], "weights_sha256": digest,
              **scoring.score(work / "weights", work / "scores.json", fixed_val.directory,
                              fixed_val.stages, dev_repeats, jobs),
              "scored_by": {"segment": None, "machine": cpu_model(),
                            "date": time.strftime("%Y-%m-%d", time.gmtime())}}
    path = folder / run_folder.SCORES
    if write and step not in {s["step"] for s in run_folder.read_scores(path)}:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        atomic_write_text(path, text + json.dumps(scores) + "\n")
    return scores
