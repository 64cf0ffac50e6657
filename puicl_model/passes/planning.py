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
* **labeled subset** — the labeled rows one pass holds: all of them, or a random subset of
  ``labeled_per_pass`` rows where there are more than a pass holds (``max_labeled``, and at
  most ``chunk_size // 2`` in a chunked pool, or the member's ``labeled_share``).
* **pass** — one forward pass (:class:`Pass`): one member's feature group, chunk and labeled
  subset. A member inside the trained range is exactly one pass. A :class:`PassPlanner` plans
  the passes of one member; :func:`plan_passes` plans every member's.

**New rows** (rows that are not in the fitted pool) are scored as *query rows* of a fitted
pass (:mod:`puicl_model.net.batch`): the pass holds the labeled subset and chunk of a transductive
pass, and the new rows attend to those rows and to themselves while no row attends to them. A
new row therefore gets the prediction it would get as one more unlabeled row of the fitted
task — minus its own negligible influence on the other rows — independently of the other new
rows and of how they are grouped. When the pool is chunked, each new row joins the chunk picked
by a hash of its values, so its prediction does not depend on its position in the input
either.

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

import numpy as np

from puicl_model.passes import seed_keys

__all__ = ["MIN_FEATURES_FOR_SUBSET", "Pass", "PassPlanner", "all_passes"]

# feature_share applies to tables of at least this many features: fewer would leave a member
# too few to separate anything
MIN_FEATURES_FOR_SUBSET = 6


# ----------------------------------------------------------------------------------- passes
@dataclass(frozen=True)
class Pass:
    """One forward pass: which rows and features of its view it holds."""

    group: int  # the member's feature group
    labeled: np.ndarray  # indices into the labeled rows
    pool: np.ndarray  # indices into the fitted pool (scored in transductive passes)
    features: np.ndarray  # feature indices (sorted)
    new: np.ndarray | None = None  # indices into the new rows: query rows of the pass
    member: int = 0
    view: int = 0  # which view's rows (inference.ViewRows) its indices refer to
    chunk: int = 0  # which of its feature group's chunks its pool rows are

    @property
    def n_rows(self) -> int:
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

    def pool_passes(self) -> Iterator[Pass]:
        """Transductive passes: every pool row once per feature group."""
        for group in range(self.n_feature_groups):
            features = self.features_of(group)
            for chunk, rows in enumerate(self.chunks_of(group)):
                yield Pass(group, self.labeled_of(group, chunk), rows, features,
                           member=self.member, view=self.view, chunk=chunk)

    def new_row_contexts(self, x_new: np.ndarray) -> Iterator[Pass]:
        """The contexts that score the rows ``x_new``: per feature group and chunk, one pass
        whose ``new`` are all the new rows that join that chunk (each row once per feature
        group, next to the chunk its values pick). A context without new rows is left out."""
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


def all_passes(planners: Sequence[PassPlanner]) -> Iterator[Pass]:
    """Every member's transductive passes, member after member."""
    for planner in planners:
        yield from planner.pool_passes()
