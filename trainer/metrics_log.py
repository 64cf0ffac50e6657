"""Watching a run: the JSONL metrics file and what rank 0 prints (:class:`SegmentLog`).

``RUN/metrics.jsonl`` holds one JSON object per line, each with a ``kind``:

* ``train`` -- every ``training.log_every`` steps: ``step`` (completed steps), ``phase``,
  ``stage``, ``loss`` and ``grad_norm`` (means over the window's applied steps), ``lr`` (of the
  last step), ``tasks_per_s`` (window), ``skipped`` (non-finite steps in the window),
  ``skipped_total``, and rank 0's resident memory now and at its peak so far (``rss_gb``,
  ``peak_rss_gb``);
* ``val`` -- every ``validation.every_steps`` steps: ``loss``, ``auc``, ``accuracy``,
  ``auc_by_pi``, ``auc_by_stage``, ``tasks``;
* ``event`` -- start, resume, skipped step, checkpoint, stop.

When a run resumes from the checkpoint of step s, records of steps after s (written before the
interruption and about to be repeated) are dropped first, so the file reads as one run.
NaN and infinities are written as ``null`` to keep the file strict JSON.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from puicl_common.run_files import open_append_inside, read_text_inside, write_bytes_inside
from trainer.heap import peak_resident_bytes, resident_bytes


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics file; a truncated last line (killed writer) is ignored."""
    records = []
    lines = read_text_inside(path).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number} is not valid JSON") from None
    return records


class MetricsLog:
    """Appends records to ``metrics.jsonl`` (rank 0 only), flushing each line.

    The file lies in the run directory: it is read, rewritten and opened following no link
    and only as a regular file (:mod:`puicl_common.run_files`)."""

    def __init__(self, path: str | Path, resume_step: int | None) -> None:
        self.path = Path(path)
        if os.path.lexists(self.path):
            self._truncate_after(resume_step or 0)
        self._handle: TextIO = open_append_inside(self.path, self.path.parent)

    def _truncate_after(self, step: int) -> None:
        kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= step]
        text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept)
        write_bytes_inside(self.path, text.encode("utf-8"), self.path.parent)

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(_clean(record), allow_nan=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


class ConsoleReporter:
    """A tqdm progress bar on a terminal (rank 0), plain summary lines otherwise."""

    def __init__(self, start: int, stop: int, enabled: bool, stream: TextIO | None = None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.bar = None
        if enabled and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=stop, initial=start, unit="step", dynamic_ncols=True, file=self.stream
            )

    def step(self, postfix: dict[str, Any]) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(postfix, refresh=False)

    def summary(self, text: str) -> None:
        """A line for logs; on a terminal it goes above the bar."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class _Window:
    """Accumulators of one logging window (the steps since the last train record)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    skipped: int = 0
    steps: int = 0
    seconds: float = 0.0
    data_wait: float = 0.0


class SegmentLog:
    """What one segment writes: records of ``metrics.jsonl`` (rank 0 only) and console lines.

    ``enabled`` is false on every rank but 0, which then writes and prints nothing.
    """

    def __init__(
        self, run_dir: Path, start: int, stop: int, global_batch: int, enabled: bool
    ) -> None:
        # opening truncates the records after ``start`` (a resumed run repeats them)
        self.metrics = MetricsLog(run_dir / "metrics.jsonl", start) if enabled else None
        self.reporter = ConsoleReporter(start, stop, enabled=enabled)
        self.stop = stop
        self.global_batch = global_batch
        self.window = _Window()

    def summary(self, text: str) -> None:
        self.reporter.summary(text)

    def event(self, event: str, step: int, **fields: Any) -> None:
        if self.metrics is not None:
            self.metrics.write({"kind": "event", "event": event, "step": step, **fields})

    def step_trained(
        self, completed: int, result: Any, seconds: float, data_wait: float, in_a_row: int
    ) -> None:
        """Count a step (``result``: a ``trainer.step.StepResult``) into the window; a skipped
        one is an event and a console line at once. ``seconds``: the step's time, data
        wait included; ``in_a_row``: skipped steps in a row, this one included."""
        window = self.window
        window.seconds += seconds
        window.data_wait += data_wait
        window.steps += 1
        if result.skipped:
            window.skipped += 1
            self.event("skipped", completed, loss=result.loss, grad_norm=result.grad_norm)
            self.summary(
                f"step {completed}/{self.stop}: non-finite loss or gradient on some rank; "
                f"step skipped ({in_a_row} in a row)"
            )
        else:
            window.loss.append(result.loss)
            window.grad_norm.append(result.grad_norm)

    def step_done(self, completed: int, result: Any, skipped_total: int, record: bool) -> None:
        """Advance the progress bar; with ``record``, write the window's train record."""
        self.reporter.step({"loss": f"{result.loss:.4f}", "stage": result.stage})
        if record:
            self._train_record(completed, result, skipped_total)
            self.window = _Window()

    def _train_record(self, completed: int, result: Any, skipped_total: int) -> None:
        window = self.window
        record = {
            "kind": "train",
            "step": completed,
            "phase": result.phase,
            "stage": result.stage,
            "loss": float(np.mean(window.loss)) if window.loss else None,
            "grad_norm": float(np.mean(window.grad_norm)) if window.grad_norm else None,
            "lr": result.lr,
            # training throughput: time in steps only (not validation, checkpoints)
            "tasks_per_s": window.steps * self.global_batch / max(window.seconds, 1e-9),
            # rank 0's time waiting for its data, as a share of the steps' time: near 0
            # when the loader keeps ahead (trainer.loader)
            "data_wait_share": window.data_wait / max(window.seconds, 1e-9),
            "skipped": window.skipped,
            "skipped_total": skipped_total,
            # rank 0's resident memory: watch it grow, or stay under the release cap
            "rss_gb": resident_bytes() / 1e9,
            "peak_rss_gb": peak_resident_bytes() / 1e9,
        }
        if torch.cuda.is_initialized():
            # the GPU's peak since the run started: what sizes micro_batch_cells there
            record["gpu_peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
        if self.metrics is not None:
            self.metrics.write(record)
        if self.reporter.bar is None:
            loss = "n/a" if record["loss"] is None else f"{record['loss']:.4f}"
            self.summary(
                f"step {completed}/{self.stop} phase {record['phase']} stage "
                f"{record['stage']} loss {loss} lr {record['lr']:.3g} "
                f"{record['tasks_per_s']:.1f} tasks/s"
            )

    def validation(self, completed: int, summary: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write({"kind": "val", "step": completed, **summary})
        self.summary(
            f"validation at step {completed}: loss {summary['loss']:.4f} "
            f"AUC {summary['auc']:.4f} accuracy {summary['accuracy']:.4f}"
        )

    def stopped(self, completed: int, reason: str) -> None:
        self.event("stopped", completed, reason=reason)
        if reason == "signal":
            self.summary(f"stop requested: checkpoint written at step {completed}")
        else:
            self.summary(
                f"time limit: checkpoint written at step {completed}; the next step "
                "and a checkpoint would not fit before the limit. Start the same "
                "command again to continue"
            )

    def close(self) -> None:
        self.reporter.close()
        if self.metrics is not None:
            self.metrics.close()
