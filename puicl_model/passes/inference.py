"""Running the planned forward passes (:mod:`puicl_model.passes.planning`) and averaging them.

The passes of every member (the words are :mod:`puicl_model.passes.planning`'s) are batched into as
few forward passes of the model as a cell budget allows, and each scored row's probability is
the mean over members of the member's mean P(y = +) over its passes. :class:`PassScorer` is
that scoring bound to a fitted classifier's model and run settings: the classifier scores its
pool and new rows with it, and the class-prior code (:mod:`puicl_model.estimator.prior`) its
cross-fitted folds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from puicl_common.runtime import torch_threads
from puicl_model.net.backends.packed_inference import inference_logits
from puicl_model.net.batch import collate_tasks
from puicl_model.passes.phases import describe, report, shows_progress
from puicl_model.passes.planning import Pass, PassPlanner, ViewRows, all_passes
from puicl_model.passes.query_rows import (
    ContextCaches,
    context_key,
    kept_context,
    query_probabilities,
)
from puicl_model.passes.scores import member_mean

__all__ = ["PassScorer", "run_passes"]


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
    rows: np.ndarray | None = None,
    caches: tuple[ContextCaches, Callable[[Pass], Hashable]] | None = None,
) -> np.ndarray:
    """Mean over members of each member's mean P(y = +) per scored row.

    A pass reads the rows ``views[pass.view]`` and scores its pool rows. A shared context's
    pass (one with ``queries``, the pool rows outside its context) runs on the path new rows
    take (:mod:`puicl_model.passes.query_rows`): one float32 forward over the context scores
    its pool rows and records the cache that its query rows are then scored next to. Other
    consecutive passes, of one member or several, are batched into one forward pass up to
    ``cells_per_forward`` table cells (a single larger pass runs alone), which bounds memory.
    Every member must score every row. ``progress(n)`` (e.g. a tqdm bar's ``update``) is
    called with the number of passes run. ``rows``: the pool rows whose probabilities are
    returned (None: all), where the passes score only those outside their contexts (shared
    contexts, :meth:`PassPlanner.pool_passes`). ``caches``:
    a store of shared contexts' caches and the key of each pass's (the query path's own, so
    that new rows scored later reuse them), looked up before a context is computed.
    """
    device = torch.device(device)
    # per member: the sum of its passes' probabilities and their count, per scored row
    total: dict[int, np.ndarray] = {}
    count: dict[int, np.ndarray] = {}
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if bfloat16
        else contextlib.nullcontext()
    )

    def add(member: int, scored: np.ndarray, proba: np.ndarray) -> None:
        if member not in total:
            total[member] = np.zeros(n_scored, dtype=np.float64)
            count[member] = np.zeros(n_scored, dtype=np.int64)
        np.add.at(total[member], scored, proba)
        np.add.at(count[member], scored, 1)

    def flush(group: list[Pass]) -> None:
        xs, n_labeled = [], []
        for item in group:
            view = views[item.view]
            xs.append(np.concatenate([view.labeled[item.labeled],
                                      view.pool[item.pool]])[:, item.features])
            n_labeled.append(len(item.labeled))
        batch = collate_tasks([torch.from_numpy(t) for t in xs], n_labeled).to(device)
        with autocast:
            logits = inference_logits(model, batch)
        proba = torch.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy()
        for slot, item in enumerate(group):
            first = len(item.labeled)
            add(item.member, item.pool, proba[slot, first : first + len(item.pool)])
        if progress is not None:
            progress(len(group))

    def shared(item: Pass) -> None:
        store, key = (None, None) if caches is None else (caches[0], caches[1](item))
        pool, queries = _shared_context_scores(model, views[item.view], item, store, key, device)
        add(item.member, item.pool, pool)
        add(item.member, item.queries, queries)
        if progress is not None:
            progress(1)

    with torch_threads(n_threads), torch.inference_mode():
        group: list[Pass] = []
        cells = 0
        for item in passes:
            if item.queries is not None:
                shared(item)
                continue
            size = item.n_rows * (len(item.features) + 1)
            if group and cells + size > cells_per_forward:
                flush(group)
                group, cells = [], 0
            group.append(item)
            cells += size
        if group:
            flush(group)
    return member_mean(total, count, rows)


def _shared_context_scores(model: torch.nn.Module, view: ViewRows, item: Pass,
                           store: ContextCaches | None, key: Hashable,
                           device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """P(y = +) of a shared context's pool rows and of its query rows: one forward over the
    context scores its own rows and records the cache the query rows are scored next to
    (float32, as new rows are: the query path takes no autocast). The cache is looked up in,
    and kept by, ``store`` under ``key``."""
    cache = kept_context(model, view, item, device, store, key)
    # (only a classifier loaded without its table holds caches without them, and it has no
    # pool to score)
    assert cache.row_logits is not None
    own = torch.softmax(cache.row_logits[len(item.labeled):], dim=-1)[:, 1].cpu().numpy()
    queries = np.empty(0, dtype=np.float32)
    if item.queries is not None and len(item.queries):
        rows = torch.from_numpy(view.pool[item.queries][:, item.features]).to(device)
        queries = query_probabilities(model, cache, rows).cpu().numpy()
    return own, queries


@dataclass(frozen=True)
class PassScorer:
    """Scores rows by the passes of some planners with one model: the mean P(y=1) of the
    views' pool rows and how many passes ran.

    ``PUICLClassifier.scorer_`` builds one from its fitted model and its current settings,
    so that code outside the classifier (the class prior's cross-fitting, the studies) scores
    other splits of the fitted rows exactly as the classifier scores its pool."""

    model: torch.nn.Module
    device: torch.device
    bfloat16: bool = False
    n_threads: int | None = None
    # tqdm bar over the passes; None shows it on a terminal when there are more than a few
    # (:func:`puicl_model.passes.phases.shows_progress`)
    progress: bool | None = None

    def __call__(self, planners: Sequence[PassPlanner], views: Sequence[ViewRows],
                 rows: np.ndarray | None = None, caches: ContextCaches | None = None,
                 ) -> tuple[np.ndarray, int]:
        """(P(y=1) of the views' pool rows, passes run); ``rows``: only those pool rows,
        against the contexts planned over the whole pool (shared contexts only); ``caches``:
        where shared contexts' caches are looked up and kept, under the query path's keys."""
        n_scored = len(views[0].pool)
        passes = list(all_passes(planners, views, rows))
        n_passes = len(passes)
        # a shared context's pass scores its query rows too: long work in few passes
        n_queries = sum(0 if item.queries is None else len(item.queries) for item in passes)
        show = shows_progress(self.progress, n_passes > 4 or n_queries > 4_000)
        bar = None
        if show:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_passes, unit="pass", desc=describe("PUICL: scoring the fitted pool"),
                       leave=False)
        done = 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            if bar is not None:
                bar.update(count)
            report(done, n_passes)  # the current phase hears how far its passes are

        try:
            proba = run_passes(
                self.model,
                views,
                iter(passes),
                n_scored=n_scored,
                device=self.device,
                bfloat16=self.bfloat16,
                # a few small passes per forward on CPU (fewer, larger ops; the [cells, e]
                # matrices stay near the cache size); a GPU (CUDA or MPS) wants large batches
                cells_per_forward=(1 << 15) if self.device.type == "cpu" else (1 << 19),
                n_threads=self.n_threads,
                progress=advance,
                rows=rows,
                caches=None if caches is None else (caches, self._keys(planners)),
            )
            return proba, n_passes
        finally:
            if bar is not None:
                bar.close()

    def _keys(self, planners: Sequence[PassPlanner]) -> Callable[[Pass], Hashable]:
        """A pass's context's key in the query path's store (:func:`context_key`)."""
        by_member = {planner.member: planner for planner in planners}
        return lambda item: context_key(by_member[item.member], item.group, item.chunk,
                                        self.device)
