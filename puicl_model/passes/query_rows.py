"""Scoring new rows over a cached context: the fixed-shape query path.

A new row is scored as a *query row* of a fitted pass (:mod:`puicl_model.passes.planning`): it
attends to the pass's context rows (its labeled subset and pool chunk) and to itself, and no
row attends to it (the specification's rule, :mod:`puicl_model.net.specification`). So the context
is the same whatever new rows are scored: the model's forward over it records its keys and
values at every attention across rows once (:func:`context_cache`), and the new rows are then
scored by the model's forward over them next to that cache, in blocks of a fixed number of rows
(:func:`query_probabilities`, the last block padded). Both forwards are the model's own
(:meth:`PUICLModel.cell_logits <puicl_model.net.model.PUICLModel.cell_logits>`) over the layouts
of :mod:`puicl_model.net.backends.cached_context`.

Why a path of its own: scoring query rows inside a forward pass over context and queries
together gives each row a result that depends, in its last bits, on how many rows share the
pass and where the row sits among them (the matrix products change shape, and a masked
attention sums a row's own term at another place). Here every product has one shape for a
given context, and the row's own term is added after the context's, so a row's probability is
the same bytes whatever rows it is scored with, in whatever order, in however many calls: what
scoring a table in batches, or on several machines, needs (docs/classifier.md, "Large
tables"). It agrees with the specification to float32 rounding
(``tests/model/test_query_rows.py``).

A fitted classifier keeps the caches of its contexts in a :class:`ContextCaches` (up to a byte
budget), so that later calls, and later batches on a dask worker, skip the contexts' forwards.

Computed in float32 on any device, without autocast.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from puicl_common.runtime import torch_threads
from puicl_model.net.backends.cached_context import (
    ContextCache,
    ContextCells,
    QueryCells,
    aligned_keys,
)
from puicl_model.net.batch import TaskBatch
from puicl_model.net.model import PUICLModel
from puicl_model.passes.phases import describe, report, shows_progress
from puicl_model.passes.planning import Pass, PassPlanner, ViewRows
from puicl_model.passes.scores import member_mean

__all__ = ["DEFAULT_CACHE_BYTES", "GPU_BLOCK_BYTES", "QUERY_BLOCK_ROWS", "ContextCache",
           "ContextCaches", "context_cache", "context_key", "fitted_contexts", "kept_context",
           "query_block_rows", "query_probabilities", "score_new_rows"]

# Query rows per forward: every block has this many rows (the last one padded). A new row joins
# one chunk's context, so a call of n rows gives each of the k contexts about n/k rows: small
# blocks waste little on padding (a block's cost grows with its rows), and a block's attention
# scores ([columns, heads, rows, context rows] floats, ~15 MB next to a 1,300-row context with
# 20 features) stay in cache. 32 rows give the same bits as 128 did on the development
# tables (docs/performance.md, "New rows after fit").
QUERY_BLOCK_ROWS = 32
# On a GPU a block of 32 rows is far too small a forward to fill the card (a 200,000-row pool
# would be thousands of forwards per context), so there a block holds as many rows as keep its
# attention scores within this many bytes: a power of two between QUERY_BLOCK_ROWS and
# MAX_GPU_BLOCK_ROWS, fixed by the context's shape, so that every block next to one context
# still has one shape (query_block_rows).
GPU_BLOCK_BYTES = 1 << 30
MAX_GPU_BLOCK_ROWS = 8192

# What a fitted classifier keeps of its contexts' caches by default. A context of r rows and
# d features caches 2·(L-1)·r·(d+1)·e + 2·r·e floats: ~40 MB for a chunk of 1,000 pool rows
# next to 300 labeled rows with 20 features (the bundled model, e = 64, L = 4), so 1 GiB keeps
# every context of a 20,000-row table at the default settings (18 of them, 730 MiB) and the
# first ones of larger fitted pools.
DEFAULT_CACHE_BYTES = 1 << 30


def _task(x: Tensor, n_labeled: int) -> TaskBatch:
    """``x`` [rows, d] as a batch of one task (unchecked: the cached layouts read ``x`` only)."""
    sizes = (torch.tensor([value]) for value in (n_labeled, x.shape[0], x.shape[1]))
    return TaskBatch(x[None], *sizes)


@torch.inference_mode()
def context_cache(model: PUICLModel, x: Tensor, n_labeled: int) -> ContextCache:
    """The cache of one pass's context ``x`` [rows, d] (its first ``n_labeled`` rows
    labeled): the model's forward over it, its rows attending to one another as in a
    transductive pass, recording what query rows read and the context rows' own logits."""
    cells = ContextCells(n_labeled)
    logits = model.cell_logits(model.embed(_task(x, n_labeled), cells), cells)
    return cells.cache(row_logits=logits[0])


@torch.inference_mode()
def _query_logits(model: PUICLModel, cache: ContextCache, x: Tensor) -> Tensor:
    """Logits [rows, 2] of query rows ``x`` [rows, d] next to the cached context."""
    cells = QueryCells(cache)
    return model.cell_logits(model.embed(_task(x, 0), cells), cells)[0]


def query_block_rows(cache: ContextCache, device: torch.device | str) -> int:
    """Query rows per forward next to ``cache`` on ``device``: :data:`QUERY_BLOCK_ROWS` off
    CUDA; on CUDA the largest power of two whose attention scores (``[columns, heads, rows,
    context rows]`` floats, and as many again for their exponentials' products) fit in
    :data:`GPU_BLOCK_BYTES`, between :data:`QUERY_BLOCK_ROWS` and :data:`MAX_GPU_BLOCK_ROWS`.
    A function of the context's shape and the device type only: a row's bytes never depend on
    the rows scored with it."""
    if torch.device(device).type != "cuda":
        return QUERY_BLOCK_ROWS
    columns, heads, context_rows, _ = cache.keys[0].shape
    # the scores' context axis on a GPU is padded (QueryCells.attend_rows)
    per_row = 2 * 4 * columns * heads * (aligned_keys(context_rows) + 1)
    fitting = max(GPU_BLOCK_BYTES // per_row, QUERY_BLOCK_ROWS)
    return min(1 << (fitting.bit_length() - 1), MAX_GPU_BLOCK_ROWS)


def query_probabilities(model: PUICLModel, cache: ContextCache, x: Tensor,
                        block_rows: int | None = None,
                        advance: Callable[[int], object] | None = None) -> Tensor:
    """P(y = +) [rows] of query rows ``x`` [rows, d] next to the cached context, scored in
    blocks of exactly ``block_rows`` rows (None: :func:`query_block_rows` for ``x``'s device;
    the last block padded with zero rows, discarded); ``advance(rows)`` hears each block's
    rows as it is scored.

    On a CPU the blocks run side by side, as many at a time as torch has threads, each block
    on one thread (:func:`_side_by_side`): the same bytes as one block after another on one
    thread, whatever the thread count."""
    if block_rows is None:
        block_rows = query_block_rows(cache, x.device)
    x = x.float()
    n = x.shape[0]
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    starts = range(0, n, block_rows)

    def block_proba(start: int) -> Tensor:
        block = x[start : start + block_rows]
        size = block.shape[0]
        if size < block_rows:
            block = torch.cat([block, block.new_zeros(block_rows - size, block.shape[1])])
        return torch.softmax(_query_logits(model, cache, block), dim=-1)[:size, 1]

    workers = torch.get_num_threads() if x.device.type == "cpu" else 1
    for start, proba in zip(starts, _side_by_side(block_proba, starts, workers), strict=True):
        out[start : start + len(proba)] = proba
        if advance is not None:
            advance(len(proba))
    return out


def _side_by_side(job: Callable[[int], Tensor], items: Sequence[int],
                  workers: int) -> Iterator[Tensor]:
    """``job(item)`` of every item, in the items' order: one after another where ``workers`` is
    1 or there is one item; else on a pool of ``workers`` threads with torch's own count set to
    one while they run. A block's operations are small: split over a team of threads, each
    operation waits at its end for the slowest member, and on a machine busy with other work a
    descheduled member stalls the whole team (docs/performance.md, "The portfolio on a busy
    machine"); blocks on threads of their own share no such barrier."""
    if workers <= 1 or len(items) <= 1:
        yield from map(job, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    with torch_threads(1), ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(job, items)


class ContextCaches:
    """The context caches of one fitted classifier's passes, kept up to ``max_bytes``.

    A cache is kept while it fits in the budget, in the order contexts are first scored, and
    then for good: scoring visits the contexts in the same order at every call, so keeping the
    first ones (rather than the last ones used) makes every later call reuse as many as the
    budget holds. ``max_bytes=0`` keeps none. A copy (pickle, ``copy``, scikit-learn's
    ``clone``) starts empty: the caches are rebuilt where they are used, never shipped (a
    classifier saved without its table saves them apart). Safe to share between threads
    (dask's threaded workers).
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._caches: dict[Hashable, ContextCache] = {}
        self._used = 0  # bytes kept (a running sum: filling n caches stays linear in n)
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(cache.nbytes for cache in self._caches.values())

    def __len__(self) -> int:
        return len(self._caches)

    def get(self, key: Hashable) -> ContextCache | None:
        with self._lock:
            return self._caches.get(key)

    def keep(self, key: Hashable, cache: ContextCache) -> None:
        """Keep ``cache`` under ``key`` where the budget has room for it."""
        with self._lock:
            if key not in self._caches and self._used + cache.nbytes <= self.max_bytes:
                self._caches[key] = cache
                self._used += cache.nbytes

    def __getstate__(self) -> dict[str, Any]:
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["max_bytes"])  # type: ignore[misc]


def context_key(planner: PassPlanner, group: int, chunk: int,
                device: torch.device | str) -> Hashable:
    """The key of a context's cache in a :class:`ContextCaches`: the pass planner (its fields:
    equal planners key alike), the feature group and chunk, and the device it lies on."""
    return (planner, group, chunk, str(device))


def _pass_context(model: PUICLModel, view: ViewRows, item: Pass,
                  device: torch.device | str) -> ContextCache:
    context = np.concatenate([view.labeled[item.labeled], view.pool[item.pool]])
    return context_cache(model, torch.from_numpy(context[:, item.features]).to(device),
                         len(item.labeled))


def kept_context(model: PUICLModel, view: ViewRows, item: Pass, device: torch.device | str,
                 caches: ContextCaches | None, key: Hashable) -> ContextCache:
    """The cache of ``item``'s context: the one ``caches`` keeps under ``key``, else computed
    and offered to ``caches``."""
    cache = None if caches is None else caches.get(key)
    if cache is None:
        cache = _pass_context(model, view, item, device)
        if caches is not None:
            caches.keep(key, cache)
    return cache


def fitted_contexts(model: PUICLModel, views: Sequence[ViewRows],
                    planners: Sequence[PassPlanner], device: torch.device | str = "cpu",
                    n_threads: int | None = None,
                    ) -> Iterator[tuple[int, int, int, ContextCache]]:
    """Every context new rows can be scored against, as ``(planner's index, feature group,
    chunk, its cache)``: the same caches :func:`score_new_rows` computes (and keeps under
    :func:`context_key`), made one at a time so that a caller can set each aside."""
    for index, planner in enumerate(planners):
        view = views[planner.view]
        for item in planner.contexts(view.pool_score):
            with torch_threads(n_threads):
                cache = _pass_context(model, view, item, device)
            yield index, item.group, item.chunk, cache


def score_new_rows(model: PUICLModel, views: Sequence[ViewRows], x_new: Sequence[np.ndarray],
                   planners: Sequence[PassPlanner], device: torch.device | str = "cpu",
                   n_threads: int | None = None, progress: bool | None = None,
                   caches: ContextCaches | None = None) -> np.ndarray:
    """Mean over members of each member's mean P(y = +) over its passes, per new row
    (``x_new[view]``: the rows in each view's encoding): the query rows of every planner's
    contexts (:meth:`~puicl_model.passes.planning.PassPlanner.new_row_contexts`), averaged as
    :func:`puicl_model.passes.inference.run_passes` averages pool rows. ``caches``: where the
    contexts' caches are looked up and kept (the views' own; None computes every context).
    ``progress``: a tqdm bar over the contexts (None: on a terminal; ``shows_progress``)."""
    from tqdm.auto import tqdm

    contexts = [(planner, item) for planner in planners
                for item in planner.new_row_contexts(x_new[planner.view],
                                                     views[planner.view].pool_score)]
    n_new = len(x_new[0])
    total = {planner.member: np.zeros(n_new) for planner in planners}
    count = {planner.member: np.zeros(n_new, dtype=np.int64) for planner in planners}
    show = shows_progress(progress, len(contexts) > 4)
    name = describe(f"PUICL: scoring {n_new:,} new rows")
    # the current phase hears the rows scored, block by block: a shared context is one
    # context for every new row
    work, scored = sum(len(item.new) for _, item in contexts), 0

    def advance(rows: int) -> None:
        nonlocal scored
        scored += rows
        report(scored, work)

    with torch_threads(n_threads), tqdm(contexts, unit="context", desc=name, leave=False,
                                  disable=not show) as bar:
        for planner, item in bar:
            key = context_key(planner, item.group, item.chunk, device)
            cache = kept_context(model, views[planner.view], item, device, caches, key)
            queries = x_new[planner.view][item.new][:, item.features]
            proba = query_probabilities(model, cache, torch.from_numpy(queries).to(device),
                                        advance=advance)
            np.add.at(total[planner.member], item.new, proba.cpu().numpy())
            np.add.at(count[planner.member], item.new, 1)
    return member_mean(total, count, what="new rows")
