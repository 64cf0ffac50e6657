"""The spawn keys of the classifier's random draws, written once.

Every random choice of a fit is drawn from
``numpy.random.SeedSequence(root_seed, spawn_key=key)`` with ``key`` naming what is drawn, so
that the same settings draw the same rows on every machine and one draw never shifts another.
A key's first word is a tag from the table below; the words after it (a feature group, a chunk,
a fold count...) tell apart the draws of one kind. The values are part of every stored score:
changing one changes the rows a fit draws, so a new draw takes a new tag, never an old one.

The table is :data:`KEY_SHAPES`: per tag, the shapes of the keys drawn under it, an ``int``
word fixed and a ``str`` word standing for a count or an index. Two draws may share a tag only
where their shapes cannot give the same key (``tests/model/test_seed_keys.py`` checks it).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BAGS", "BOOSTED_FOLDS", "BOOTSTRAP", "CONTEXT", "FEATURES", "FEATURE_SUBSET", "HELD_OUT",
    "JUDGED", "KEY_SHAPES", "LABELED", "LOGISTIC_FOLDS", "MEMBER", "POOL", "POOL_SAMPLE",
    "PRIOR_FOLDS", "PRIOR_POOL", "RANKING",
]

# --------------------------------------------------------- the passes (passes.planning)
# a member's partition of its visible features in feature groups: (FEATURES, 0)
FEATURES: Final = 1
# the order of the pool rows that a feature group's chunks split: (POOL, group)
POOL: Final = 2
# the labeled rows of the pass of one group and chunk: (LABELED, group, chunk)
LABELED: Final = 3
# prefix of every planning draw of ensemble member m > 0: (MEMBER, m, *key); member 0 draws
# without it, keeping the keys it had before ensembles existed
MEMBER: Final = 4
# the share of the features one member sees: (FEATURE_SUBSET,)
FEATURE_SUBSET: Final = 5
# the pool rows of a feature group's shared context: (CONTEXT, group)
CONTEXT: Final = 6

# ------------------------------------------------------ the class prior (estimator.prior)
# the labeled positives' split in folds for π̂: (PRIOR_FOLDS, n_folds). The key (11,) alone
# is the legacy rule's halves that studies/puicl_prior.py still draws to compare with
PRIOR_FOLDS: Final = 11
# the pool rows the folds are scored against on a pool larger than they read: (PRIOR_POOL,)
PRIOR_POOL: Final = 19

# ------------------------------------------------------------ 12: two draws, one tag
# π's bootstrap (estimator.prior_report): (BOOTSTRAP, 0) resamples the pool's rows,
# (BOOTSTRAP, 1, K, k) the held-out positives of fold k of K.
# The portfolio's held-out positives (estimator.portfolio): (HELD_OUT,).
# Both kept 12 because the scores stored so far were drawn with it. They cannot collide: with a
# spawn key, SeedSequence pads the root seed to its pool of 4 words and hashes each word of the
# key after it into the whole pool, so keys of different lengths ((12,) against (12, 0) and
# (12, 1, K, k)) are different inputs to that hash, their states equal only by a 128-bit
# collision, as any two distinct keys.
BOOTSTRAP: Final = 12
HELD_OUT: Final = 12

# --------------------------------------------------------- the portfolio (estimator.portfolio)
# the seed of the logistic regression's cross-fitting folds: (LOGISTIC_FOLDS,)
LOGISTIC_FOLDS: Final = 13
# the seed of the gradient-boosted trees' cross-fitting folds: (BOOSTED_FOLDS,)
BOOSTED_FOLDS: Final = 15
# the pool rows the blend is chosen against, on pools larger than it reads: (JUDGED,); the
# held-out positives it is chosen on, where more were held out than it reads: (JUDGED, 1)
JUDGED: Final = 16
# PU bagging's draws: the labeled positives' split in folds, (BAGS,); the pool rows drawn into
# bag b, (BAGS, b)
BAGS: Final = 17

# the seed of the logistic regression's folds that rank the pool for shared contexts
# (estimator.pool_ranking): (RANKING,)
RANKING: Final = 18

# -------------------------------------------------------- the pool sample (estimator.pool_sample)
# the unlabeled rows a fit keeps from a pool larger than pool_sample: (POOL_SAMPLE,)
POOL_SAMPLE: Final = 14

# each draw's key shapes: an int word is fixed, a str word any count or index ("..." any
# further words). Planning's keys also appear behind (MEMBER, "member") for members m > 0.
KEY_SHAPES: Final[dict[str, tuple[tuple[int | str, ...], ...]]] = {
    "FEATURES": ((FEATURES, 0),),
    "POOL": ((POOL, "group"),),
    "LABELED": ((LABELED, "group", "chunk"),),
    "MEMBER": ((MEMBER, "member", "..."),),
    "FEATURE_SUBSET": ((FEATURE_SUBSET,),),
    "CONTEXT": ((CONTEXT, "group"),),
    "PRIOR_FOLDS": ((PRIOR_FOLDS, "n_folds"),),
    "PRIOR_POOL": ((PRIOR_POOL,),),
    "BOOTSTRAP": ((BOOTSTRAP, 0), (BOOTSTRAP, 1, "n_folds", "fold")),
    "HELD_OUT": ((HELD_OUT,),),
    "LOGISTIC_FOLDS": ((LOGISTIC_FOLDS,),),
    "POOL_SAMPLE": ((POOL_SAMPLE,),),
    "BOOSTED_FOLDS": ((BOOSTED_FOLDS,),),
    "JUDGED": ((JUDGED,), (JUDGED, 1)),
    "BAGS": ((BAGS,), (BAGS, "bag")),
    "RANKING": ((RANKING,),),
}
