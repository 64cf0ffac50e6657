"""Planning the forward passes that score a fitted PU table: the one place the plan is made.

The model was trained on tasks of 100–300 labeled positives, pools of 0.5–2× that, and at most
``ModelConfig.max_features`` (20) features, and it has no positional encoding (shuffling rows
or features changes nothing it computes). A table is scored through *passes*, each a task the
model can take, planned from these words (used with these meanings in the classifier,
:mod:`puicl_model.estimator.ensemble` and :mod:`puicl_model.passes.inference`):

* **member** — one entry of the ensemble, a :class:`~puicl_model.estimator.ensemble.Member` of the
  catalogue :data:`~puicl_model.estimator.ensemble.MEMBERS`: what the model is shown (an encoding,
  and optionally a random share of the labeled rows and of the features). ``n_estimators`` (the
  scikit-learn name) counts members; :func:`members_for` picks them. A member that would
  repeat an earlier one exactly is skipped. A row's probability is the mean over members of
  each member's probability, itself the mean over the member's passes that score the row.
* **view** — the fitted table as one encoding (``numeric``, ``categorical``,
  :mod:`puicl_model.estimator.preprocessing`) makes it: a :class:`View`. Members with the same
  encoding share one view; view 0 is the classifier's configured encoding.
* **feature group** — the features one pass sees. A member sees every feature of its view, or
  a random share of them (``feature_share``, on tables of at least
  :data:`MIN_FEATURES_FOR_SUBSET` features); with more than ``max_features`` of them, a random
  partition splits them into ``G = ceil(d / max_features)`` near-equal groups, so that every
  member scores every row once with every feature it sees.
* **chunk** — the pool rows one pass scores. A pool of at most ``single_pass_limit`` rows is
  one chunk (one pass, as the paper does); a larger pool is split at random, per feature
  group, into ``ceil(n_u / chunk_size)`` near-equal chunks, each scored next to at most
  ``min(max_labeled, chunk_size // 2)`` labeled rows. Memory is that of one pass, whatever the
  pool size. Large chunks next to many labeled rows score real tables better than chunks
  shaped like the training tasks, though far outside their pool-to-labeled ratios
  (docs/classifier.md, "Outside the trained range").
* **shared context** — with ``shared_context`` (``large_pool="shared"``), a pool larger than
  ``single_pass_limit`` is not chunked: each feature group has one context of
  ``labeled_per_pass`` labeled rows and ``chunk_size`` pool rows, half of them drawn from the
  third of the pool that a ranking score puts least positive
  (:mod:`puicl_model.estimator.pool_ranking`) and the rest at random, and every other pool row
  is scored as a *query row* of that one pass, as new rows are (below). So every pool row is
  ranked against the same context, which holds negatives even where the pool is almost all
  positives (docs/recipe.md, "Training on large tasks, and pools almost all positive").
* **labeled subset** — the labeled rows one pass holds: all of them, or a random subset of
  ``labeled_per_pass`` rows where there are more than a pass holds (``max_labeled``, and at
  most ``chunk_size // 2`` in a chunked pool, or the member's ``labeled_share``).
* **pass** — one forward pass (:class:`Pass`): one member's feature group, chunk (or shared
  context, with its query rows) and labeled subset. A member inside the trained range is
  exactly one pass. A :class:`PassPlanner` plans the passes of one member;
  :func:`plan_passes` plans every member's.

**New rows** (rows that are not in the fitted pool) are scored as *query rows* of a fitted
pass (:mod:`puicl_model.net.batch`): the pass holds the labeled subset and chunk of a transductive
pass, and the new rows attend to those rows and to themselves while no row attends to them. A
new row therefore gets the prediction it would get as one more unlabeled row of the fitted
task — minus its own negligible influence on the other rows — independently of the other new
rows and of how they are grouped. When the pool is chunked, each new row joins the chunk picked
by a hash of its values, so its prediction does not depend on its position in the input
either; next to a shared context, every new row joins it, and gets the bytes a pool row outside
the context with the same values gets.

Every random choice is drawn from ``numpy.random.SeedSequence(random_state, spawn_key=key)``
with ``key`` naming what is drawn (the table :mod:`puicl_model.passes.seed_keys`,
docs/architecture.md §3), e.g. ``(FEATURES, 0)`` for a member's partition or ``(POOL, group)``
for the chunks of a feature group, prefixed ``(MEMBER, member)`` for members after the first:
the same settings give the same passes on every machine.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from puicl_model.passes import seed_keys

__all__ = ["MIN_FEATURES_FOR_SUBSET", "Pass", "PassPlanner", "ViewRows", "all_passes"]

# feature_share applies to tables of at least this many features: fewer would leave a member
# too few to separate anything
MIN_FEATURES_FOR_SUBSET = 6


class ViewRows(NamedTuple):
    """The rows of one view that its passes index: labeled rows and pool, and (for shared
    contexts) each pool row's ranking score, low where a row looks least positive."""

    labeled: np.ndarray
    pool: np.ndarray
    pool_score: np.ndarray | None = None


# ----------------------------------------------------------------------------------- passes
@dataclass(frozen=True)
class Pass:
    """One forward pass: which rows and features of its view it holds."""

    group: int  # the member's feature group
    labeled: np.ndarray  # indices into the labeled rows
    pool: np.ndarray  # indices into the fitted pool (scored in transductive passes)
    features: np.ndarray  # feature indices (sorted)
    new: np.ndarray | None = None  # indices into the new rows: query rows of the pass
    # indices into the fitted pool scored as query rows of the pass (a shared context's
    # pool rows outside the context)
    queries: np.ndarray | None = None
    member: int = 0
    view: int = 0  # which view's rows (inference.ViewRows) its indices refer to
    chunk: int = 0  # which of its feature group's chunks its pool rows are

    @property
    def n_rows(self) -> int:
        """The rows of its transductive forward: the context, and the new rows it scores."""
        return len(self.labeled) + len(self.pool) + (0 if self.new is None else len(self.new))


@dataclass(frozen=True)
class PassPlanner:
    """Plans one member's passes over a view of ``n_labeled`` + ``n_pool`` rows and
    ``n_features`` features."""

    n_labeled: int
    n_pool: int
    n_features: int
    single_pass_limit: int
    chunk_size: int
    max_labeled: int
    max_features: int
    entropy: int  # the fit's root seed
    member: int = 0  # keys the member's random draws ...
    view: int = 0  # ... and names the view its passes read
    labeled_share: float = 1.0  # share of the labeled rows each pass holds (at least 2)
    feature_share: float = 1.0  # share of the features the member sees (wide enough tables)
    # a pool larger than one pass: one shared context per feature group, every other pool row
    # a query row of it (``large_pool="shared"``), instead of random chunks
    shared_context: bool = False

    def _rng(self, *key: int) -> np.random.Generator:
        if self.member:  # member 0 keeps the keys it had before members existed
            key = (seed_keys.MEMBER, self.member, *key)
        return np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=key))

    # ------------------------------------------------------------------ labeled subsets
    @property
    def chunked(self) -> bool:
        return self.n_pool > self.single_pass_limit

    @property
    def labeled_per_pass(self) -> int:
        limit = min(self.max_labeled, self.chunk_size // 2) if self.chunked else self.max_labeled
        if self.labeled_share < 1.0:
            limit = min(limit, max(2, round(self.labeled_share * self.n_labeled)))
        return min(self.n_labeled, limit)

    def labeled_of(self, group: int, chunk: int) -> np.ndarray:
        """The labeled subset of the pass of feature group ``group`` and chunk ``chunk``."""
        size = self.labeled_per_pass
        if self.n_labeled <= size:
            return np.arange(self.n_labeled)
        rng = self._rng(seed_keys.LABELED, group, chunk)
        return np.sort(rng.choice(self.n_labeled, size=size, replace=False))

    # ------------------------------------------------------------------- feature groups
    @property
    def takes_feature_share(self) -> bool:
        return self.feature_share < 1.0 and self.n_features >= MIN_FEATURES_FOR_SUBSET

    @property
    def n_visible_features(self) -> int:
        if not self.takes_feature_share:
            return self.n_features
        return max(1, round(self.feature_share * self.n_features))

    def visible_features(self) -> np.ndarray:
        """The features this member sees (sorted): all, or its random share of them."""
        if not self.takes_feature_share:
            return np.arange(self.n_features)
        size = self.n_visible_features
        rng = self._rng(seed_keys.FEATURE_SUBSET)
        return np.sort(rng.choice(self.n_features, size, replace=False))

    @property
    def n_feature_groups(self) -> int:
        return math.ceil(self.n_visible_features / self.max_features)

    def features_of(self, group: int) -> np.ndarray:
        """The features of feature group ``group`` (sorted): one part of a random partition
        of the visible features (keyed ``(seed_keys.FEATURES, 0)``)."""
        visible = self.visible_features()
        groups = self.n_feature_groups
        if groups == 1:
            return visible
        permutation = self._rng(seed_keys.FEATURES, 0).permutation(len(visible))
        return visible[np.sort(np.array_split(permutation, groups)[group])]

    # ------------------------------------------------------------------------- chunks
    @property
    def max_scored_per_pass(self) -> int:
        """The most pool rows (or new rows) one pass scores."""
        return self.chunk_size if self.chunked else self.single_pass_limit

    def chunks_of(self, group: int) -> list[np.ndarray]:
        """The pool as feature group ``group``'s passes split it: near-equal chunks of at most
        ``max_scored_per_pass`` rows, drawn per group."""
        if not self.chunked:
            return [np.arange(self.n_pool)]
        count = math.ceil(self.n_pool / self.chunk_size)
        order = self._rng(seed_keys.POOL, group).permutation(self.n_pool)
        return [np.sort(chunk) for chunk in np.array_split(order, count)]

    @property
    def shares_context(self) -> bool:
        """Whether the pool is scored through one shared context per feature group."""
        return self.shared_context and self.chunked

    @property
    def n_contexts(self) -> int:
        """The contexts (chunks, or the one shared context) of each feature group."""
        if self.shares_context or not self.chunked:
            return 1
        return math.ceil(self.n_pool / self.chunk_size)

    def context_rows(self, group: int, pool_score: np.ndarray | None) -> np.ndarray:
        """The pool rows of feature group ``group``'s shared context (sorted):
        ``chunk_size`` rows, half of them drawn from the third of the pool that ranks least
        positive by ``pool_score`` (low: least positive), the rest from the other rows. Where a
        pool is almost all positives, a random context would hold too few negatives for the
        model, which was trained on pools of 10-90 % negatives (docs/recipe.md, "Training on
        large tasks, and pools almost all positive")."""
        if pool_score is None or len(pool_score) != self.n_pool:
            raise ValueError("a shared context needs a ranking score of every pool row")
        rng = self._rng(seed_keys.CONTEXT, group)
        size = min(self.chunk_size, self.n_pool)
        least = np.argsort(pool_score, kind="stable")[: max(self.n_pool // 3, size // 2)]
        low = rng.choice(least, size // 2, replace=False)
        rest = np.setdiff1d(np.arange(self.n_pool), low, assume_unique=True)
        return np.sort(np.r_[low, rng.choice(rest, size - len(low), replace=False)])

    # ------------------------------------------------------------------------- passes
    @property
    def random_choices(self) -> bool:
        """Whether any pass depends on a random draw (else the member is exactly one pass
        and the same whatever the seed)."""
        return (
            self.n_visible_features > self.max_features
            or self.chunked
            or self.n_labeled > self.labeled_per_pass
            or self.takes_feature_share
        )

    def pool_passes(self, pool_score: np.ndarray | None = None,
                    rows: np.ndarray | None = None) -> Iterator[Pass]:
        """Transductive passes: every pool row once per feature group, in a pass's context or
        (a shared context) as one of its query rows (``pool_score``: the pool rows' ranking,
        which a shared context is drawn by). ``rows``: a shared context's pass scores only
        these of the pool rows outside it (a query row's score does not depend on the others
        scored with it); a chunked pool takes no ``rows``."""
        if rows is not None and not self.shares_context:
            raise ValueError("only shared contexts score a subset of the pool; plan the "
                             "subset as a pool of its own")
        for group in range(self.n_feature_groups):
            features = self.features_of(group)
            if self.shares_context:
                context = self.context_rows(group, pool_score)
                scored = np.arange(self.n_pool) if rows is None else np.unique(rows)
                outside = np.setdiff1d(scored, context, assume_unique=True)
                yield Pass(group, self.labeled_of(group, 0), context, features,
                           queries=outside, member=self.member, view=self.view)
                continue
            for chunk, rows in enumerate(self.chunks_of(group)):
                yield Pass(group, self.labeled_of(group, chunk), rows, features,
                           member=self.member, view=self.view, chunk=chunk)

    def contexts(self, pool_score: np.ndarray | None = None) -> Iterator[Pass]:
        """Every context that new rows can be scored against, one pass each without rows to
        score: per feature group, its chunks or its shared context."""
        for item in self.pool_passes(pool_score):
            yield Pass(item.group, item.labeled, item.pool, item.features, member=item.member,
                       view=item.view, chunk=item.chunk)

    def new_row_contexts(self, x_new: np.ndarray, pool_score: np.ndarray | None = None,
                         ) -> Iterator[Pass]:
        """The contexts that score the rows ``x_new``: per feature group and context, one pass
        whose ``new`` are all the new rows that join that context (each row once per feature
        group: next to the shared context, or to the chunk its values pick). A context without
        new rows is left out. Without ``pool_score`` a shared context's pass has no pool rows:
        only a classifier loaded without its table, whose contexts are all cached, asks so."""
        if self.shares_context:
            every = np.arange(len(x_new))
            for group in range(self.n_feature_groups):
                rows = (np.empty(0, dtype=np.int64) if pool_score is None
                        else self.context_rows(group, pool_score))
                yield Pass(group, self.labeled_of(group, 0), rows, self.features_of(group),
                           every, member=self.member, view=self.view)
            return
        hashes = [zlib.crc32(row.tobytes()) for row in np.ascontiguousarray(x_new)]
        for group in range(self.n_feature_groups):
            features = self.features_of(group)
            chunks = self.chunks_of(group)
            # which chunk each new row joins: a function of its values, not of its position
            home = np.array([zlib.crc32(group.to_bytes(4, "little"), h) % len(chunks)
                             for h in hashes], dtype=np.int64)
            for chunk, rows in enumerate(chunks):
                joining = np.flatnonzero(home == chunk)
                if len(joining):
                    yield Pass(group, self.labeled_of(group, chunk), rows, features, joining,
                               member=self.member, view=self.view, chunk=chunk)


def all_passes(planners: Sequence[PassPlanner], views: Sequence[ViewRows] | None = None,
               rows: np.ndarray | None = None) -> Iterator[Pass]:
    """Every member's transductive passes, member after member (``views``: the rows each
    planner reads, whose pool scores shared contexts are drawn by; ``rows``: the pool rows to
    score, :meth:`PassPlanner.pool_passes`)."""
    for planner in planners:
        score = None if views is None else views[planner.view].pool_score
        yield from planner.pool_passes(score, rows)
