"""Where the portfolio (:mod:`puicl_model.estimator.portfolio`) runs beside the model, and where
it holds labeled positives out of the passes as its evidence: one rule, read by ``fit`` and
put in words by the report.

The thresholds: fewer labeled positives than :data:`MIN_LABELED_FOR_PORTFOLIO` give each
cross-fitted fold too few to score, a pool smaller than :data:`MIN_POOL_FOR_PORTFOLIO` too few
rows to rank against; there the model alone scores the table, bit for bit as with
``portfolio="none"``. From :data:`MIN_LABELED_FOR_HOLD_OUT` labeled positives on, a fifth of them
(at most :data:`MAX_HELD_OUT`) are the portfolio's evidence: set apart from the context of the
passes that score them, beside a sample of the pool, as each learner's out-of-fold scores set
apart a fifth of the rows from the fit that scores them (so every member is judged as fitted on
four fifths of the labeled positives). The pool itself is scored by the passes of every labeled
positive, as the model alone scores it: on the development suite's large tables, passes that
lacked half the labeled positives ranked the pool 0.02 AUC below the model alone on average
(0.08 on one table; docs/decisions.md, "Held-out positives stay in the context"). Smaller tables
read the class prior's cross-fitted folds instead where their pool is larger than the folds'
sample of it (:func:`reads_folds`): its passes share their contexts, so each fold scores a sample
of the pool beside them, and π̂ reads the same folds later. A smaller pool takes the fallback
with no evidence read: there two folds cost one to two times the fit (one pass: about 40 % of
the default's time at the paper's size).
"""

from __future__ import annotations

import numpy as np

from puicl_model.estimator.evidence_rows import held_out_rows
from puicl_model.estimator.prior import PRIOR_POOL_ROWS

__all__ = ["FOLDS_ON_SHARED_POOLS", "HELD_OUT_FOLDS", "MAX_HELD_OUT", "MIN_LABELED_FOR_HOLD_OUT",
           "MIN_LABELED_FOR_PORTFOLIO", "MIN_POOL_FOR_PORTFOLIO", "alone_reason",
           "held_out_mask", "reads_folds", "runs_on"]

MIN_LABELED_FOR_PORTFOLIO = 20
MIN_POOL_FOR_PORTFOLIO = 100
MIN_LABELED_FOR_HOLD_OUT = 600
MAX_HELD_OUT = 1000


def runs_on(setting: str, n_labeled: int, n_pool: int) -> bool:
    """Whether the portfolio runs (the classifier's ``portfolio`` setting ``setting``) on a
    table of ``n_labeled`` positives and ``n_pool`` rows."""
    return (setting == "auto" and n_labeled >= MIN_LABELED_FOR_PORTFOLIO
            and n_pool >= MIN_POOL_FOR_PORTFOLIO)


# the labeled positives set apart as evidence: one of this many folds, as one of the learners'
# five folds is set apart from the fit that scores it
HELD_OUT_FOLDS = 5


def held_out_mask(n_labeled: int, entropy: int) -> np.ndarray | None:
    """The labeled positives a portfolio sets apart as its evidence (a mask over the labeled
    rows), or None where the class prior's folds are its evidence."""
    if n_labeled < MIN_LABELED_FOR_HOLD_OUT:
        return None
    return held_out_rows(n_labeled, min(n_labeled // HELD_OUT_FOLDS, MAX_HELD_OUT), entropy)


# below MIN_LABELED_FOR_HOLD_OUT, the class prior's folds are the evidence where the passes share
# their contexts and the pool is larger than the folds' sample of it (prior.PRIOR_POOL_ROWS). On
# the generated tables of 300 labeled positives and pools of 2,500-20,000 rows the fixed blend
# trailed the forest or boosted bags alone by up to 0.23 AUC, a gap the folds' 300 positives
# show at several standard errors. On the development suite's every-row tasks with pools of
# 1,025-2,000 rows no pick changed and fit took 2-3 times as long (docs/decisions.md, "Folds as
# evidence on large pools")
FOLDS_ON_SHARED_POOLS = True


def reads_folds(n_labeled: int, n_pool: int, shares_context: bool) -> bool:
    """Whether a portfolio without held-out positives chooses on the class prior's folds
    (``shares_context``: every pass planner of the table shares its contexts)."""
    return (FOLDS_ON_SHARED_POOLS and shares_context and n_pool > PRIOR_POOL_ROWS
            and MIN_LABELED_FOR_PORTFOLIO <= n_labeled < MIN_LABELED_FOR_HOLD_OUT)


def alone_reason(setting: str, n_labeled: int, n_pool: int) -> str:
    """Why the model alone scores a table, in words (the report's)."""
    if setting == "none":
        return ("portfolio='none' was asked, so the model alone scores every table; no "
                "portfolio of learners was fitted.")
    return (f"This table has {n_labeled:,} labeled positives and {n_pool:,} unlabeled rows; "
            f"the portfolio needs at least {MIN_LABELED_FOR_PORTFOLIO} labeled positives (two "
            f"cross-fitted folds must each hold enough to score) and {MIN_POOL_FOR_PORTFOLIO} "
            "unlabeled rows (enough to rank against), so the model alone scores it, "
            "bit for bit as with portfolio='none'.")
