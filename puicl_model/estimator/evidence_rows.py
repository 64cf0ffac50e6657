"""Which rows the portfolio's evidence reads (:mod:`puicl_model.estimator.portfolio`): the
labeled positives held out of the passes on a large table, and the seeded samples of pool rows
and of held-out positives that the blend is chosen on. Each is drawn under its own key of the
fit's root seed (:mod:`puicl_model.passes.seed_keys`), so a refit draws the same rows.

The samples are small on purpose: the evidence only has to tell a clearly better blend from
the fallback, and on a table with held-out positives the model scores the rows outside them
only where the chosen blend weighs it (docs/decisions.md, "A portfolio chosen per table").

Positives set apart from the passes' context, held out or one fold of the class prior's
cross-fitting, are laid out last wherever they are scored: :class:`HeldRows` is that rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from puicl_model.passes import seed_keys

__all__ = ["JUDGED_HELD_OUT", "JUDGED_POOL_ROWS", "MOST_JUDGED_POOL_ROWS", "HeldRows",
           "held_out_rows", "judged_held_rows", "judged_pool_rows"]

# the blend is chosen against a seeded sample of this many pool rows (all of a smaller pool):
# on a table with held-out positives the model scores the rest only where the chosen blend
# weighs it, so that a table where the learners win costs about what they cost; on a smaller
# one the class prior's folds score their positives against the sample. 500 rows pick as 2,000
# did on every task of the size grid (docs/decisions.md), for a quarter of the model's passes
JUDGED_POOL_ROWS = 500
# the blend is chosen on a seeded sample of this many of the held-out positives (all of fewer):
# the model scores the others only where the chosen blend weighs it. 300 pick as 1,000 did on
# every large task of the size grid (docs/decisions.md), for a third of the model's passes
JUDGED_HELD_OUT = 300
# where the choice is close (portfolio_rule.READ_MORE_Z), both samples double, up to every held-out
# positive and this many pool rows: the samples are prefixes of one keyed order, so a larger
# sample holds the smaller one and the model scores only the rows it adds
MOST_JUDGED_POOL_ROWS = 4000


@dataclass(frozen=True)
class HeldRows:
    """Labeled positives set apart from the passes' context: those held out of every pass (a
    large table's evidence) or one fold of the class prior's cross-fitting. Wherever they are
    scored they come last, after the pool's rows in the passes' rows and after the context's
    labeled rows in a learner's: this value is the one place that lays them out so, and that
    splits scores laid out so."""

    mask: np.ndarray  # over the labeled rows

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    def in_pool(self, labeled: np.ndarray, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The labeled rows left in the context, and the pool with these rows after it."""
        return (np.ascontiguousarray(labeled[~self.mask]),
                np.ascontiguousarray(np.concatenate([pool, labeled[self.mask]])))

    def last(self, labeled: np.ndarray) -> np.ndarray:
        """The labeled rows, these last."""
        return np.concatenate([labeled[~self.mask], labeled[self.mask]])

    @staticmethod
    def positions(n_before: int, rows: np.ndarray) -> np.ndarray:
        """Where the set-apart rows ``rows`` (indices among them) sit after ``n_before``."""
        return n_before + np.asarray(rows)

    @staticmethod
    def split(scores: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores of rows laid out with ``count`` set-apart rows last: (the others', theirs)."""
        first = len(scores) - count
        return scores[:first], scores[first:]


def held_out_rows(n_labeled: int, n_held: int, entropy: int) -> np.ndarray:
    """The mask of the ``n_held`` labeled rows held out of every pass's context, drawn under
    the key ``(seed_keys.HELD_OUT,)`` of the fit's root seed."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_keys.HELD_OUT,)))
    mask = np.zeros(n_labeled, dtype=bool)
    mask[rng.choice(n_labeled, size=n_held, replace=False)] = True
    return mask


def judged_pool_rows(n_pool: int, entropy: int, size: int | None = None) -> np.ndarray:
    """The pool rows (sorted) the blend is chosen against: all of a pool of at most ``size``
    (None: :data:`JUDGED_POOL_ROWS`), else a sample of that many keyed ``(seed_keys.JUDGED,)``
    (a larger ``size``'s sample holds a smaller one's)."""
    return _judged_rows(n_pool, JUDGED_POOL_ROWS if size is None else size, entropy,
                        (seed_keys.JUDGED,))


def judged_held_rows(n_held: int, entropy: int, size: int | None = None) -> np.ndarray:
    """The held-out positives (sorted, among the held-out ones) the blend is chosen on: all
    of at most ``size`` (None: :data:`JUDGED_HELD_OUT`), else a sample of that many keyed
    ``(seed_keys.JUDGED, 1)``."""
    return _judged_rows(n_held, JUDGED_HELD_OUT if size is None else size, entropy,
                        (seed_keys.JUDGED, 1))


def _judged_rows(n: int, size: int, entropy: int, key: tuple[int, ...]) -> np.ndarray:
    if n <= size:
        return np.arange(n)
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))
    return np.sort(rng.permutation(n)[:size])
