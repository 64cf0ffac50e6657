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

The planner's estimators differ only through these random choices; when none applies (a
table inside the trained range) there is exactly one pass. One planner plans the passes of one
*ensemble member* (:mod:`puicl_model.ensemble`): its ``n_estimators`` is the number of feature
groups, so that every member scores every row with every feature (of the features it sees).
A member may also show each pass a random share of the labeled rows (``labeled_share``) and
see a random share of the features (``feature_share``).

**New rows** (rows that are not in the fitted pool) are scored as *query rows* of a fitted
pass (:mod:`puicl_model.batch`): the pass holds the labeled rows and pool chunk of a
transductive pass, and the new rows attend to those rows and to themselves while no row
attends to them. A new row therefore gets the prediction it would get as one more unlabeled
row of the fitted task — minus its own negligible influence on the other rows — independently
of the other new rows and of how they are grouped (up to one chunk's length per pass). When the
pool is chunked, each new row is paired with the chunk picked by a hash of its values, so its
prediction does not depend on its position in the input either.

A member's probability of a row is the mean over its estimators of P(y = + | pass); the
ensemble's is the mean over members (:func:`run_passes`).

Every random choice is drawn from ``numpy.random.SeedSequence(random_state, spawn_key=key)``
with ``key`` naming what is drawn (docs/architecture.md §3), e.g. ``(_FEATURES, round)`` or
``(_POOL, estimator)``, prefixed ``(_MEMBER, member)`` for ensemble members after the first:
the same settings give the same passes on every machine.
"""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from puicl_model.backends.packed_inference import inference_logits
from puicl_model.batch import collate_tasks

__all__ = ["Pass", "PassPlanner", "PassTables", "run_passes"]

# spawn-key tags: what a random draw is for (11 is the classifier's split of the labeled rows)
_FEATURES = 1
_POOL = 2
_LABELED = 3
_MEMBER = 4  # prefix of every draw of ensemble member m > 0: (_MEMBER, m, ...)
_FEATURE_SUBSET = 5

# feature_share applies to tables of at least this many features: fewer would leave a member
# too few to separate anything
MIN_FEATURES_FOR_SUBSET = 6


@dataclass(frozen=True)
class Pass:
    """One forward pass: which rows and features of the fitted table it holds."""

    estimator: int
    labeled: np.ndarray  # indices into the labeled rows
    pool: np.ndarray  # indices into the fitted pool (scored in transductive passes)
    features: np.ndarray  # feature indices (sorted)
    new: np.ndarray | None = None  # indices into the new rows: query rows of the pass
    member: int = 0  # the ensemble member it belongs to
    view: int = 0  # which tables (PassTables) its indices refer to

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
    member: int = 0  # ensemble member (keys its random draws) ...
    view: int = 0  # ... and the index of its member's tables in run_passes
    labeled_share: float = 1.0  # share of the labeled rows each pass holds (at least 2)
    feature_share: float = 1.0  # share of the features the member sees (wide enough tables)

    @property
    def chunked(self) -> bool:
        return self.n_pool > self.single_pass_limit

    @property
    def labeled_per_pass(self) -> int:
        limit = min(self.max_labeled, self.chunk_size // 2) if self.chunked else self.max_labeled
        if self.labeled_share < 1.0:
            limit = min(limit, max(2, round(self.labeled_share * self.n_labeled)))
        return min(self.n_labeled, limit)

    @property
    def rows_per_chunk(self) -> int:
        """The most pool rows (and new rows) in one pass."""
        return self.chunk_size if self.chunked else self.single_pass_limit

    def _rng(self, *key: int) -> np.random.Generator:
        if self.member:  # member 0 keeps the keys it had before ensemble members existed
            key = (_MEMBER, self.member, *key)
        return np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=key))

    @property
    def subsets_features(self) -> bool:
        return self.feature_share < 1.0 and self.n_features >= MIN_FEATURES_FOR_SUBSET

    def visible_features(self) -> np.ndarray:
        """The features this member sees (sorted): all, or its random share of them."""
        if not self.subsets_features:
            return np.arange(self.n_features)
        size = max(1, round(self.feature_share * self.n_features))
        return np.sort(self._rng(_FEATURE_SUBSET).choice(self.n_features, size, replace=False))

    @property
    def n_visible_features(self) -> int:
        if not self.subsets_features:
            return self.n_features
        return max(1, round(self.feature_share * self.n_features))

    @property
    def n_feature_groups(self) -> int:
        return math.ceil(self.n_visible_features / self.max_features)

    @property
    def effective_estimators(self) -> int:
        """Distinct estimators: 1 when no random choice is involved, else n_estimators."""
        return self.n_estimators if self.random_choices else 1

    @property
    def random_choices(self) -> bool:
        """Whether any pass depends on a random draw (else every estimator is the same)."""
        return (
            self.n_visible_features > self.max_features
            or self.chunked
            or self.n_labeled > self.labeled_per_pass
            or self.subsets_features
        )

    def features_of(self, estimator: int) -> np.ndarray:
        visible = self.visible_features()
        groups = self.n_feature_groups
        if groups == 1:
            return visible
        round_, group = divmod(estimator, groups)
        permutation = self._rng(_FEATURES, round_).permutation(len(visible))
        return visible[np.sort(np.array_split(permutation, groups)[group])]

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
                yield Pass(estimator, self.labeled_of(estimator, index), chunk, features,
                           member=self.member, view=self.view)

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
                    yield Pass(estimator, labeled, chunk, features, new, member=self.member,
                               view=self.view)


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


class PassTables(NamedTuple):
    """The rows one view's passes index: labeled rows, fitted pool, new rows (or None)."""

    labeled: np.ndarray
    pool: np.ndarray
    new: np.ndarray | None = None


def run_passes(
    model: torch.nn.Module,
    tables: Sequence[PassTables],
    passes: Iterator[Pass],
    n_scored: int,
    device: torch.device | str = "cpu",
    bfloat16: bool = False,
    cells_per_forward: int = 1 << 16,
    n_threads: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Mean over ensemble members of each member's mean P(y = +) per scored row.

    A pass reads the tables ``tables[pass.view]``. Scored rows are the pool rows of
    transductive passes (``new`` None) or the new rows (``new`` given: the same rows in every
    view). Consecutive passes, of one member or several, are batched into one forward pass up
    to ``cells_per_forward`` table cells (a single larger pass runs alone), which bounds memory.
    Every member must score every row. ``progress(n)`` (e.g. a tqdm bar's ``update``) is
    called with the number of passes run.
    """
    device = torch.device(device)
    scoring_new = tables[0].new is not None
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
            view = tables[item.view]
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
    if not total or any((scored == 0).any() for scored in count.values()):
        raise RuntimeError("internal error: some rows were not scored by every member")
    # (one member: its own mean, bit for bit)
    return np.mean([total[m] / count[m] for m in sorted(total)], axis=0)
