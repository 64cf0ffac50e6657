"""The boosted bags' lead over the forests in standard errors, as the fallback's tree test reads
it (``portfolio_rule.stronger_trees``), from the bag learners alone: per task that reads
evidence (600 labeled positives or more, or a pool of more than 2,000 rows), each learner
fitted on every labeled positive and pool row in the learners' encoding, with the bags a fit
gives it (``learners.bag_count``). No pass of the model is run, so it screens many tables in
minutes; a fit holds its held-out positives last among the labeled rows, so its bags, and its
lead, differ a little: the tables near the bar are rerun as a user runs them.

``--boosted-bags`` fits the boosted bags with that many bags instead (10: as many as the forest
on a large pool without held-out positives).

    python -m studies.trees_lead --suite dev --cells all:0.2,all:0.5,all:c0.05,all:c0.2
    python -m studies.trees_lead --suite user --tables unseen --boosted-bags 10
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from puicl_model.estimator.learners import (
    BAGGED,
    BAGGED_BOOSTED,
    CrossFittedLearner,
    bag_count,
    encoded_table,
)
from puicl_model.estimator.portfolio_gate import MIN_LABELED_FOR_HOLD_OUT
from puicl_model.estimator.portfolio_rule import stronger_trees
from puicl_model.estimator.prior import PRIOR_POOL_ROWS
from studies.portfolio_evidence import chosen_tasks


def trees_lead(x_labeled: np.ndarray, x_pool: np.ndarray, entropy: int,
               boosted_bags: int | None = None) -> float:
    """The boosted bags' lead over the forests in standard errors (``stronger_trees``)."""
    held_out = len(x_labeled) >= MIN_LABELED_FOR_HOLD_OUT
    labeled, pool = {}, {}
    for kind in (BAGGED, BAGGED_BOOSTED):
        bags = bag_count(kind, len(x_pool), held_out=held_out)
        if kind == BAGGED_BOOSTED and boosted_bags is not None:
            bags = boosted_bags
        labeled[kind], pool[kind] = CrossFittedLearner(kind, entropy, n_threads=1).fit(
            x_labeled, x_pool, bags=bags)
    return stronger_trees(labeled, pool)[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.trees_lead",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("user", "dev"), required=True)
    parser.add_argument("--tables", default="decision", help="user: decision or unseen")
    parser.add_argument("--cells", default="all:0.5", help="dev: the size grid's cells")
    parser.add_argument("--only", default="", help="tasks whose name holds one of these")
    parser.add_argument("--boosted-bags", type=int, default=None)
    args = parser.parse_args(argv)
    tasks = chosen_tasks(args.suite, args.tables, args.cells, args.only)
    for make in tasks:
        task = make()
        labeled = task.s == 1
        if labeled.sum() < MIN_LABELED_FOR_HOLD_OUT and (~labeled).sum() <= PRIOR_POOL_ROWS:
            continue  # the fallback is taken unread: no boosted bags are fitted
        x = encoded_table(task.X, task.s == 1)[1]
        lead = trees_lead(x[labeled], x[~labeled], task.seed, args.boosted_bags)
        print(f"{task.name:50s} labeled {int(labeled.sum()):5d}, pool {int((~labeled).sum()):6d}: "
              f"lead {lead:5.1f} SE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
