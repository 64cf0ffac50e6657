"""Running the planned forward passes (:mod:`puicl_model.planning`) and averaging them.

The passes of every member (the words are :mod:`puicl_model.planning`'s) are batched into as
few forward passes of the model as a cell budget allows, and each scored row's probability is
the mean over members of the member's mean P(y = +) over its passes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch

from puicl_model.backends.packed_inference import inference_logits
from puicl_model.batch import collate_tasks
from puicl_model.planning import Pass

__all__ = ["ViewRows", "run_passes", "threads"]


@contextlib.contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch threads (restoring the previous count after)."""
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class ViewRows(NamedTuple):
    """The rows of one view that its passes index: labeled rows, pool, new rows (or None)."""

    labeled: np.ndarray
    pool: np.ndarray
    new: np.ndarray | None = None


def run_passes(
    model: torch.nn.Module,
    views: Sequence[ViewRows],
    passes: Iterator[Pass],
    n_scored: int,
    device: torch.device | str = "cpu",
    bfloat16: bool = False,
    cells_per_forward: int = 1 << 16,
    n_threads: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Mean over members of each member's mean P(y = +) per scored row.

    A pass reads the rows ``views[pass.view]``. Scored rows are the pool rows of
    transductive passes (``new`` None) or the new rows (``new`` given: the same rows in every
    view). Consecutive passes, of one member or several, are batched into one forward pass up
    to ``cells_per_forward`` table cells (a single larger pass runs alone), which bounds memory.
    Every member must score every row. ``progress(n)`` (e.g. a tqdm bar's ``update``) is
    called with the number of passes run.
    """
    device = torch.device(device)
    scoring_new = views[0].new is not None
    # per member: the sum of its passes' probabilities and their count, per scored row
    total: dict[int, np.ndarray] = {}
    count: dict[int, np.ndarray] = {}
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if bfloat16
        else contextlib.nullcontext()
    )

    def flush(group: list[Pass]) -> None:
        xs, n_labeled, n_context = [], [], []
        for item in group:
            view = views[item.view]
            rows = [view.labeled[item.labeled], view.pool[item.pool]]
            if scoring_new:
                rows.append(view.new[item.new])
            xs.append(np.concatenate(rows)[:, item.features])
            n_labeled.append(len(item.labeled))
            n_context.append(len(item.labeled) + len(item.pool))
        batch = collate_tasks(
            [torch.from_numpy(t) for t in xs],
            n_labeled,
            n_context if scoring_new else None,
        ).to(device)
        with autocast:
            logits = inference_logits(model, batch)
        proba = torch.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy()
        for slot, item in enumerate(group):
            first = len(item.labeled) + (len(item.pool) if scoring_new else 0)
            scored = item.new if scoring_new else item.pool
            if item.member not in total:
                total[item.member] = np.zeros(n_scored, dtype=np.float64)
                count[item.member] = np.zeros(n_scored, dtype=np.int64)
            np.add.at(total[item.member], scored, proba[slot, first : first + len(scored)])
            np.add.at(count[item.member], scored, 1)
        if progress is not None:
            progress(len(group))

    with threads(n_threads), torch.inference_mode():
        group: list[Pass] = []
        cells = 0
        for item in passes:
            size = item.n_rows * (len(item.features) + 1)
            if group and cells + size > cells_per_forward:
                flush(group)
                group, cells = [], 0
            group.append(item)
            cells += size
        if group:
            flush(group)
    if not total or any((scored == 0).any() for scored in count.values()):
        raise RuntimeError("internal error: some rows were not scored by every member")
    # (one member: its own mean, bit for bit)
    return np.mean([total[m] / count[m] for m in sorted(total)], axis=0)
