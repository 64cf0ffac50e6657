"""One segment of a relayed run, from the committed folder to the folder to commit next.

``run_segment`` reads the run folder (``relay.folder``), checks its state against the record,
replays the previous segment's last steps and compares the state reached with the digest that
segment recorded, trains until its time budget, commits the state of that step ``M`` and
trains ``replay_steps`` more to ``N`` (the next segment replays ``[M, N)``), scores the state
it started from beside the training, and writes the new folder and its record line to OUT.

Time (``budget_s`` from the start; 0: none): the chunks of new steps end by a deadline that
leaves room for the last ``replay_steps`` steps at the measured speed (with 30 % to spare), the
scores' end (``score_seconds``) and the segment's end (``FINISH_S``: the pack, the files).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from puicl_common.runtime import resolve_device
from relay import folder as run_folder
from relay import scoring, state_pack
from relay.digest import code_digest, differing_parts, state_digest
from relay.machine import difference_reason, machine_identity
from relay.shards import Lookahead, ShardQueue
from relay.training import (
    RelayTrainer,
    chunk_steps,
    place_checkpoint,
    snapshot,
    steps_that_fit,
)
from trainer.config import load_run_config
from trainer.export import load_run_checkpoint
from trainer.metrics_log import read_metrics
from trainer.sampler import StepSampler

ROOT = Path(__file__).resolve().parents[1]
FINISH_S = 25.0  # after the last step: the digest, the pack's end, the files
OUT_FILES = 7  # what a segment gives back, with the shell's log.txt: within the 8 files
OUT_FILE_BYTES = 16 * 2**20


class RunComplete(RuntimeError):
    """The run has reached its last step: nothing to train (exit 0)."""


class ReplayDiffers(RuntimeError):
    """The replay differs and no change of machine explains it: the run stops (exit 3)."""


@dataclass(frozen=True)
class SegmentOptions:
    """What ``python -m relay segment`` takes (``relay.cli`` documents each)."""

    folder: Path
    out: Path
    work: Path
    device: str = "auto"
    budget_s: float = 520.0
    until_step: int | None = None
    threads: int | None = None
    workers: int | None = None
    replay_steps: int | None = None
    first_chunk_steps: int = 200
    chunk_seconds: float = 90.0
    score_seconds: float = 20.0
    dev_repeats: int = 2
    dev_jobs: int | None = None
    dev_datasets: str | None = None
    val_config: Path = scoring.PAPER_CONFIG


@dataclass
class _Run:
    """What the segment learns as it goes."""

    start: int = 0  # the committed step it starts from
    replay_end: int = 0  # the previous segment's end (the first new step)
    committed: int = 0  # M
    target: int = 0  # where the last steps end unless the time runs out
    end: int = 0  # N
    wall: dict[str, float] = field(default_factory=dict)


def say(text: str) -> None:
    print(f"relay: {text}", flush=True)


class Segment:
    """One segment's work, in the order :meth:`run` calls it."""

    def __init__(self, options: SegmentOptions) -> None:
        self.o = options
        self.t0 = time.monotonic()
        self.folder = options.folder
        self.settings = run_folder.read_settings(self.folder)
        self.record_text = (self.folder / run_folder.RECORD).read_text(encoding="utf-8")
        self.lines = run_folder.read_record(self.folder / run_folder.RECORD)
        self.previous = run_folder.newest_state_line(self.lines)
        self.config_path = self.folder / run_folder.CONFIG
        self.config = load_run_config(self.config_path)
        self.total = self.config.curriculum.total_steps
        self.k = options.replay_steps or int(self.settings["replay_steps"])
        device = resolve_device(options.device)
        self.device = device.type
        self.threads = options.threads or (1 if device.type == "cpu" else None)
        self.machine = machine_identity(device, self.threads)
        self.code = code_digest(ROOT)
        self.run = _Run()
        self.run_dir, self.shards = options.work / "run", options.work / "shards"
        self.trainer = RelayTrainer(self.config_path, self.shards, self.run_dir, self.device,
                                    self.threads, self.t0, before_piece=self.maybe_start_scorer)
        self.scores_text = (self.folder / run_folder.SCORES).read_text(encoding="utf-8") \
            if (self.folder / run_folder.SCORES).exists() else ""
        self.scored = {line["step"] for line in
                       run_folder.read_scores(self.folder / run_folder.SCORES)}
        self.to_score: tuple[int, str] | None = None  # (step, weights' sha256)
        self.scorer: scoring.Scorer | None = None
        self.sampler = StepSampler(self.config.training.sampler, self.config.curriculum,
                                   self.config.seed)

    def deadline(self, reserve: float) -> float | None:
        return None if not self.o.budget_s else self.t0 + self.o.budget_s - reserve

    def lap(self, name: str, began: float) -> float:
        now = time.monotonic()
        self.run.wall[name] = round(now - began, 2)
        return now

    # ------------------------------------------------------------------ the start -------
    def prepare(self) -> None:
        """Check the committed folder and put its state into a fresh run directory."""
        if self.previous is not None and self.previous["end"]["step"] >= self.total:
            raise RunComplete(f"the run is complete: it reached step {self.total} in segment "
                              f"{self.previous['segment']}; nothing to train")
        replay_end = int(self.previous["end"]["step"]) if self.previous else 0
        if self.o.until_step is not None and self.o.until_step <= replay_end:
            raise run_folder.FolderError(f"--until-step {self.o.until_step} is not beyond the "
                                         f"run's step {replay_end}")
        unpacked = run_folder.check_state(self.folder, self.previous)
        for path in (self.run_dir, self.o.work / "committed", self.o.work / "packed"):
            shutil.rmtree(path, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        if unpacked is None:
            return
        manifest, data = unpacked
        step = manifest["step"]
        place_checkpoint(data, step, self.run_dir)
        _, payload = load_run_checkpoint(self.run_dir, step)
        if state_digest(payload)["state"] != self.previous["committed"]["digest"]["state"]:
            raise run_folder.FolderError(
                f"the committed state of step {step} is not the state segment "
                f"{self.previous['segment']} recorded: its tensors' digest differs")
        metrics = self.folder / run_folder.METRICS
        (self.run_dir / run_folder.METRICS).write_bytes(metrics.read_bytes())
        self.run.start, self.run.replay_end = step, int(self.previous["end"]["step"])
        if step not in self.scored:  # exported now: the trainer's rotation may delete it
            self.to_score = (step, scoring.export_weights(self.run_dir, step,
                                                          self.o.work / "weights"))

    def start_generation(self) -> None:
        workers = self.o.workers or max(1, (os.cpu_count() or 2) - 2)
        self.o.work.mkdir(parents=True, exist_ok=True)
        self.queue = ShardQueue(self.config_path, self.shards, workers,
                                self.o.work / "prior-gen.log")
        validation = self.config.validation
        val_ticket = None
        if validation.every_steps > 0:
            val_ticket = self.queue.add("val", {stage: list(range(validation.steps_per_stage))
                                                for stage in validation.stages},
                                        "the validation split")
        # nothing beyond the step the segment may end at is generated
        last = min(self.total, self.o.until_step or self.total)
        self.ahead = Lookahead(self.queue, self.sampler, last)
        self.ahead.start_at(self.run.start)
        self.ahead.queue_until(max(self.run.replay_end,
                                   self.run.start + self.o.first_chunk_steps))
        self.fixed_val = scoring.queue_fixed_val(self.queue, self.o.val_config, self.config,
                                                 self.o.work, val_ticket)

    # ------------------------------------------------------------------ the replay ------
    def replay(self) -> dict[str, Any]:
        """Train the previous segment's last steps again and compare the state reached."""
        if self.previous is None:
            return {"verdict": "none"}
        began = time.monotonic()
        start, end = self.run.start, self.run.replay_end
        old_metrics = read_metrics(self.run_dir / run_folder.METRICS)
        self.ahead.ready(end)
        reached = self.trainer.train_to(end, self.deadline(FINISH_S), "the replay")
        if reached != end:
            raise run_folder.FolderError(f"the replay reached step {reached}, not {end}, "
                                         "within the time budget")
        _, payload = load_run_checkpoint(self.run_dir, end)
        replayed = state_digest(payload)
        recorded = self.previous["end"]["digest"]
        verdict = {"verdict": "IDENTICAL" if replayed["state"] == recorded["state"]
                   else "DIFFERENT", "from_step": start, "to_step": end,
                   "recorded": recorded["state"], "replayed": replayed["state"],
                   "recorded_machine": self.previous["machine"]["kind"]}
        if verdict["verdict"] == "DIFFERENT":
            new_metrics = read_metrics(self.run_dir / run_folder.METRICS)
            verdict.update(
                differing_parts=differing_parts(recorded, replayed),
                first_differing_logged_step=first_differing_step(old_metrics, new_metrics,
                                                                 start, end),
                reason=self.reason_for_difference())
        self.lap("replay", began)
        say(f"replay of steps {start}..{end - 1}: {verdict['verdict']}"
            + (f" ({verdict['reason']})" if verdict.get("reason") else ""))
        return verdict

    def reason_for_difference(self) -> str:
        reason = difference_reason(self.previous["machine"], self.machine)
        if reason is not None:
            return reason
        if self.previous.get("code_sha256") != self.code:
            return "training code changed, on the same machine kind and builds"
        return "unexplained: the same machine kind, builds and code"

    # ------------------------------------------------------------------ new steps -------
    def train_chunks(self) -> int:
        """Train chunks of new steps until the deadline; returns the step M reached."""
        began = time.monotonic()
        step = self.run.replay_end
        cap = min(self.total, self.o.until_step or self.total) - self.k
        per_shard = self.config.shards.steps_per_shard
        while step < cap:
            rate = self.trainer.times.seconds_per_step()
            reserve_k = self.k * rate * 1.3 + 8.0 if rate else self.k * 0.5 + 8.0
            deadline = self.deadline(FINISH_S + self.o.score_seconds + reserve_k)
            size = chunk_steps(rate, self.o.chunk_seconds, self.o.first_chunk_steps, per_shard)
            stop = min(cap, step + size)
            if deadline is not None:
                fit = steps_that_fit(deadline - time.monotonic(), rate)
                if fit == 0 or time.monotonic() >= deadline:
                    break
                stop = stop if fit is None else min(stop, step + fit)
            self.ahead.queue_until(stop + size + self.k)  # the next chunk, while this trains
            self.ahead.ready(stop)
            reached = self.trainer.train_to(stop, deadline, f"steps {step}..{stop - 1}")
            if reached < stop:
                step = reached
                break  # the trainer's time limit ended it
            step = reached
        self.lap("train", began)
        return max(step, self.run.replay_end)

    def train_last_steps(self) -> int:
        """From the committed step M, ``replay_steps`` more (fewer at the run's end)."""
        began = time.monotonic()
        target = self.run.target
        reached = self.trainer.train_to(target, self.deadline(FINISH_S),
                                        f"steps {self.run.committed}..{target - 1}, the "
                                        "next segment's replay")
        self.lap("train_last", began)
        return reached

    # ------------------------------------------------------------------ the whole -------
    def run_all(self) -> dict[str, Any]:
        self.prepare()
        self.start_generation()
        try:
            replay = self.replay()
            if replay["verdict"] == "DIFFERENT" and not replay["reason"].startswith(
                    ("machine kind changed", "software builds changed")):
                line = self.record_line(replay, continued=False)
                self.write_out(line, state=None, scores=self.finish_scores())
                raise ReplayDiffers(
                    f"the replay of steps {replay['from_step']}..{replay['to_step'] - 1} is "
                    f"DIFFERENT ({replay['reason']}); the run does not continue: the record's "
                    f"line is in {self.o.out}")
            return self.train_and_commit(replay)
        finally:
            self.queue.close()
            if self.scorer is not None:
                self.scorer.stop()

    def train_and_commit(self, replay: dict[str, Any]) -> dict[str, Any]:
        self.run.committed = self.train_chunks()
        self.run.target = min(self.total, self.o.until_step or self.total,
                              self.run.committed + self.k)
        # the last steps' shards and the fixed validation split are all the generator still
        # owes: what it would write beyond them, no segment reads, and its cores are the
        # development suite's from here on
        self.ahead.ready(self.run.target)
        self.queue.wait(self.fixed_val.ticket)
        self.queue.close()
        committed = self.commit_snapshot()
        self.run.end = self.train_last_steps()
        _, payload = load_run_checkpoint(self.run_dir, self.run.end)
        end = {"step": self.run.end, "digest": state_digest(payload)}
        scores = self.finish_scores()
        self.pack_thread.join()
        if self.pack_error:
            raise self.pack_error
        committed.update(packed_bytes=sum(p["bytes"] for p in self.packed["parts"]),
                         parts=len(self.packed["parts"]))
        self.lap("total", self.t0)
        line = self.record_line(replay, continued=True, end=end, committed=committed)
        self.write_out(line, state=self.o.work / "packed", scores=scores)
        return line

    def commit_snapshot(self) -> dict[str, Any]:
        """Set the state of step M aside and start packing it (on the host's cores, while
        the GPU trains the last steps)."""
        step = self.run.committed
        path = snapshot(self.run_dir, step, self.o.work / "committed")
        _, payload = load_run_checkpoint(self.o.work / "committed", step)
        committed = {"step": step, "checkpoint_sha256": state_pack.sha256_hex(
            path.read_bytes()), "digest": state_digest(payload)}
        self.pack_error: Exception | None = None

        def pack() -> None:
            try:
                self.packed = state_pack.pack(path, self.o.work / "packed", step)
            except Exception as err:  # raised again in the main thread
                self.pack_error = err

        self.pack_thread = threading.Thread(target=pack, name="pack", daemon=True)
        self.pack_thread.start()
        return committed

    # ------------------------------------------------------------------ the scores ------
    def maybe_start_scorer(self) -> None:
        """Start scoring the state this segment started from once the fixed validation split
        is written (checked before each piece of training, never waited on there)."""
        if self.to_score is None or self.scorer is not None \
                or not self.queue.is_done(self.fixed_val.ticket):
            return
        jobs = self.o.dev_jobs or max(1, (os.cpu_count() or 2) - 4)
        self.scorer = scoring.Scorer(self.o.work / "weights", self.o.work / "scores.json",
                                     self.fixed_val, self.o.dev_repeats, jobs,
                                     self.o.dev_datasets)

    def finish_scores(self) -> dict[str, Any] | None:
        """The scores of the state this segment started from, as far as the time allowed."""
        if self.to_score is None:
            return None
        began = time.monotonic()
        if self.scorer is None:
            self.queue.wait(self.fixed_val.ticket)
            self.maybe_start_scorer()
        scores = self.scorer.finish(self.deadline(FINISH_S / 2))
        step, digest = self.to_score
        self.lap("score", began)
        return {"step": step, "segment": self.previous["segment"], "weights_sha256": digest,
                **scores, "scored_by": {"segment": len(self.lines) + 1,
                                        "machine": self.machine["host_cpu"],
                                        "date": time.strftime("%Y-%m-%d", time.gmtime())}}

    # ------------------------------------------------------------------ the record ------
    def record_line(self, replay: dict[str, Any], continued: bool, **parts: Any) -> dict:
        trained = None
        if continued:
            trained = trained_summary(read_metrics(self.run_dir / run_folder.METRICS),
                                      self.run.replay_end, self.run.end,
                                      self.config.curriculum.global_batch)
            trained["generation_wait_s"] = round(self.queue.wait_seconds, 2)
            trained["generation_busy_s"] = round(self.queue.busy_seconds, 2)
        return {"segment": len(self.lines) + 1,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": self.machine, "world_size": 1, "code_sha256": self.code,
                "training_hash": self.settings["training_hash"], "budget_s": self.o.budget_s,
                "replay": replay, "continued": continued, "trained": trained,
                "end": parts.get("end"), "committed": parts.get("committed"),
                "scored_step": self.to_score[0] if self.to_score else None,
                "wall_s": self.run.wall,
                "pieces": self.trainer.times.pieces}

    def write_out(self, line: dict[str, Any], state: Path | None,
                  scores: dict[str, Any] | None) -> None:
        """The new run folder under OUT: the record, the scores, and the metrics and state
        the record names."""
        out = self.o.out / self.folder.name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        if state is not None:
            (out / run_folder.METRICS).write_bytes(
                (self.run_dir / run_folder.METRICS).read_bytes())
            (out / run_folder.STATE).mkdir(exist_ok=True)
            for name in [p["file"] for p in self.packed["parts"]] + [state_pack.MANIFEST]:
                (out / run_folder.STATE / name).write_bytes((state / name).read_bytes())
        if scores is not None:
            (out / run_folder.SCORES).write_text(
                self.scores_text + json.dumps(strict_json(scores), allow_nan=False) + "\n")
        # the record last: a folder with its line is a folder with everything the line names
        (out / run_folder.RECORD).write_text(
            self.record_text + json.dumps(strict_json(line), allow_nan=False) + "\n")
        files = [p for p in self.o.out.rglob("*") if p.is_file()]
        large = [p for p in files if p.stat().st_size > OUT_FILE_BYTES]
        if len(files) > OUT_FILES + 1 or large:
            raise run_folder.FolderError(
                f"{self.o.out} holds {len(files)} files ({', '.join(map(str, large))} over "
                "16 MiB): a lent machine gives back at most 8 of at most 16 MiB")


def strict_json(value: Any) -> Any:
    """``value`` with NaN and infinities as None: the record stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(item) for item in value]
    return value


def first_differing_step(old: list[dict], new: list[dict], start: int, end: int) -> int | None:
    """The first logged step in ``(start, end]`` whose train record (loss, gradient norm)
    differs between two runs' metrics, or None."""
    def logged(records: list[dict]) -> dict[int, tuple]:
        return {r["step"]: (r.get("loss"), r.get("grad_norm")) for r in records
                if r.get("kind") == "train" and start < r["step"] <= end}

    before, after = logged(old), logged(new)
    return next((step for step in sorted(set(before) | set(after))
                 if before.get(step) != after.get(step)), None)


def trained_summary(records: list[dict], first: int, end: int, batch: int) -> dict[str, Any]:
    """The new steps ``[first, end)``: tasks/s in the steps (the trainer's windows, weighted
    by their time) and the share of that time spent waiting for data."""
    seconds = wait = 0.0
    previous = first
    for record in sorted((r for r in records if r.get("kind") == "train"
                          and first < r["step"] <= end), key=lambda r: r["step"]):
        span = (record["step"] - previous) * batch / record["tasks_per_s"]
        seconds += span
        wait += span * record["data_wait_share"]
        previous = record["step"]
    steps = end - first
    return {"first_step": first, "last_step": end - 1, "steps": steps,
            "tasks_per_s": round(steps * batch / seconds, 1) if seconds else None,
            "data_wait_share": round(wait / seconds, 4) if seconds else None}


def run_segment(options: SegmentOptions) -> dict[str, Any]:
    """Train one segment; returns its record line (written to OUT with the new folder)."""
    return Segment(options).run_all()
