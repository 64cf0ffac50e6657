"""Scoring a fitted PU table with the model: which forward passes, and running them.

The model was trained on tasks of 100–300 labeled positives, pools of 0.5–2× that, and at most
``ModelConfig.max_features`` (20) features. A table outside that range is scored through several
forward passes ("passes"), each a task the model can take:

* **Feature subsets.** With ``d > max_features`` features, estimator ``k`` sees one group of a
  random partition of the features into ``G = ceil(d / max_features)`` near-equal groups; the
  partition is redrawn every ``G`` estimators, so ``G`` consecutive estimators cover every
  feature exactly once.
* **Pool chunks.** A pool of at most ``single_pass_limit`` unlabeled rows is scored in one
  pass (as the paper does). A larger pool is split (randomly, per estimator) into
  ``ceil(n_u / chunk_size)`` near-equal chunks, each scored in its own pass next to at most
  ``chunk_size // 2`` labeled rows: η = 2, the largest pool-to-labeled ratio of training, and
  close to the cheapest configuration per scored row (docs/performance.md). Memory is that of
  one pass, whatever the pool size.
* **Labeled subsets.** With more labeled positives than a pass holds (``max_labeled``, or
  ``chunk_size // 2`` in a chunked pool), every pass draws its own random subset (bagging).

Estimators differ only through these random choices; when none applies (a table inside the
trained range) there is exactly one pass, and ``n_estimators`` is irrelevant.

**New rows** (rows that are not in the fitted pool) are scored as *query rows* of a fitted
pass (:mod:`puicl_model.batch`): the pass holds the labeled rows and pool chunk of a
transductive pass, and the new rows attend to those rows and to themselves while no row
attends to them. A new row therefore gets the prediction it would get as one more unlabeled
row of the fitted task — minus its own negligible influence on the other rows — independently
of the other new rows and of how they are grouped (up to one chunk's length per pass). When the
pool is chunked, each new row is paired with the chunk picked by a hash of its values, so its
prediction does not depend on its position in the input either.

The predicted probability of a row is the mean over estimators of P(y = + | pass).

Every random choice is drawn from ``numpy.random.SeedSequence(random_state, spawn_key=key)``
with ``key`` naming what is drawn (docs/architecture.md §3), e.g. ``(_FEATURES, round)`` or
``(_POOL, estimator)``: the same settings give the same passes on every machine.
"""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from puicl_model.backends.packed_inference import inference_logits
from puicl_model.batch import collate_tasks

__all__ = ["Pass", "PassPlanner", "run_passes"]

# spawn-key tags: what a random draw is for
_FEATURES = 1
_POOL = 2
_LABELED = 3


@dataclass(frozen=True)
class Pass:
    """One forward pass: which rows and features of the fitted table it holds."""

    estimator: int
    labeled: np.ndarray  # indices into the labeled rows
    pool: np.ndarray  # indices into the fitted pool (scored in transductive passes)
    features: np.ndarray  # feature indices (sorted)
    new: np.ndarray | None = None  # indices into the new rows: query rows of the pass

    @property
    def n_rows(self) -> int:
        return len(self.labeled) + len(self.pool) + (0 if self.new is None else len(self.new))


@dataclass(frozen=True)
class PassPlanner:
    """Plans the passes for a fitted table of ``n_labeled`` + ``n_pool`` rows, ``n_features``."""

    n_labeled: int
    n_pool: int
    n_features: int
    n_estimators: int
    single_pass_limit: int
    chunk_size: int
    max_labeled: int
    max_features: int
    entropy: int

    @property
    def chunked(self) -> bool:
        return self.n_pool > self.single_pass_limit

    @property
    def labeled_per_pass(self) -> int:
        limit = min(self.max_labeled, self.chunk_size // 2) if self.chunked else self.max_labeled
        return min(self.n_labeled, limit)

    @property
    def rows_per_chunk(self) -> int:
        """The most pool rows (and new rows) in one pass."""
        return self.chunk_size if self.chunked else self.single_pass_limit

    def _rng(self, *key: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=key))

    @property
    def n_feature_groups(self) -> int:
        return math.ceil(self.n_features / self.max_features)

    @property
    def effective_estimators(self) -> int:
        """Distinct estimators: 1 when no random choice is involved, else n_estimators."""
        random_choices = (
            self.n_features > self.max_features
            or self.chunked
            or self.n_labeled > self.labeled_per_pass
        )
        return self.n_estimators if random_choices else 1

    def features_of(self, estimator: int) -> np.ndarray:
        groups = self.n_feature_groups
        if groups == 1:
            return np.arange(self.n_features)
        round_, member = divmod(estimator, groups)
        permutation = self._rng(_FEATURES, round_).permutation(self.n_features)
        return np.sort(np.array_split(permutation, groups)[member])

    def chunks_of(self, estimator: int) -> list[np.ndarray]:
        """The pool split into near-equal chunks of at most ``rows_per_chunk`` rows."""
        if not self.chunked:
            return [np.arange(self.n_pool)]
        count = math.ceil(self.n_pool / self.chunk_size)
        order = self._rng(_POOL, estimator).permutation(self.n_pool)
        return [np.sort(chunk) for chunk in np.array_split(order, count)]

    def labeled_of(self, estimator: int, chunk: int) -> np.ndarray:
        size = self.labeled_per_pass
        if self.n_labeled <= size:
            return np.arange(self.n_labeled)
        rng = self._rng(_LABELED, estimator, chunk)
        return np.sort(rng.choice(self.n_labeled, size=size, replace=False))

    def pool_passes(self) -> Iterator[Pass]:
        """Transductive passes: every pool row once per estimator."""
        for estimator in range(self.effective_estimators):
            features = self.features_of(estimator)
            for index, chunk in enumerate(self.chunks_of(estimator)):
                yield Pass(estimator, self.labeled_of(estimator, index), chunk, features)

    def new_row_passes(self, x_new: np.ndarray) -> Iterator[Pass]:
        """Passes that score the rows ``x_new``: each once per estimator, as query rows."""
        hashes = [zlib.crc32(row.tobytes()) for row in np.ascontiguousarray(x_new)]
        for estimator in range(self.effective_estimators):
            features = self.features_of(estimator)
            chunks = self.chunks_of(estimator)
            # which chunk each new row joins: a function of its values, not of its position
            home = np.array([zlib.crc32(estimator.to_bytes(4, "little"), h) % len(chunks)
                             for h in hashes], dtype=np.int64)
            for index, chunk in enumerate(chunks):
                members = np.flatnonzero(home == index)
                labeled = self.labeled_of(estimator, index)
                for start in range(0, len(members), self.rows_per_chunk):
                    new = members[start : start + self.rows_per_chunk]
                    yield Pass(estimator, labeled, chunk, features, new)


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
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


def run_passes(
    model: torch.nn.Module,
    x_labeled: np.ndarray,
    x_pool: np.ndarray,
    passes: Iterator[Pass],
    n_scored: int,
    x_new: np.ndarray | None = None,
    device: torch.device | str = "cpu",
    bfloat16: bool = False,
    cells_per_forward: int = 1 << 16,
    n_threads: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Mean P(y = +) per scored row over the estimators that scored it.

    Scored rows are the pool rows of transductive passes (``x_new`` None) or the new rows
    (``x_new`` given). Consecutive passes are batched into one forward pass up to
    ``cells_per_forward`` table cells (a single larger pass runs alone), which bounds memory.
    ``progress(n)`` (e.g. a tqdm bar's ``update``) is called with the number of passes run.
    """
    device = torch.device(device)
    total = np.zeros(n_scored, dtype=np.float64)
    count = np.zeros(n_scored, dtype=np.int64)
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if bfloat16
        else contextlib.nullcontext()
    )

    def flush(group: list[Pass]) -> None:
        tables, n_labeled, n_context = [], [], []
        for item in group:
            rows = [x_labeled[item.labeled], x_pool[item.pool]]
            if x_new is not None:
                rows.append(x_new[item.new])
            tables.append(np.concatenate(rows)[:, item.features])
            n_labeled.append(len(item.labeled))
            n_context.append(len(item.labeled) + len(item.pool))
        batch = collate_tasks(
            [torch.from_numpy(t) for t in tables],
            n_labeled,
            n_context if x_new is not None else None,
        ).to(device)
        with autocast:
            logits = inference_logits(model, batch)
        proba = torch.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy()
        for slot, item in enumerate(group):
            first = len(item.labeled) + (len(item.pool) if x_new is not None else 0)
            scored = item.new if x_new is not None else item.pool
            np.add.at(total, scored, proba[slot, first : first + len(scored)])
            np.add.at(count, scored, 1)
        if progress is not None:
            progress(len(group))

    with _threads(n_threads), torch.inference_mode():
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
    if (count == 0).any():
        raise RuntimeError("internal error: some rows were not scored by any pass")
    return total / count
