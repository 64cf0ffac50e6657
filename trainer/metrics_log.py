"""Watching a run: the JSONL metrics file and what rank 0 prints.

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
import sys
from pathlib import Path
from typing import Any, TextIO

from puicl_common.atomic import atomic_write_bytes


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
    lines = Path(path).read_text(encoding="utf-8").splitlines()
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
    """Appends records to ``metrics.jsonl`` (rank 0 only), flushing each line."""

    def __init__(self, path: str | Path, resume_step: int | None) -> None:
        self.path = Path(path)
        if self.path.exists():
            self._truncate_after(resume_step or 0)
        self._handle: TextIO = self.path.open("a", encoding="utf-8")

    def _truncate_after(self, step: int) -> None:
        kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= step]
        text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept)
        atomic_write_bytes(self.path, text.encode("utf-8"))

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
