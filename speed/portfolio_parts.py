"""Where the default classifier's time goes on one table: the default and the model alone
(``portfolio="none"``), fit and ``predict_proba`` of the pool, then each of the portfolio's
learners fitted alone on the learners' encoding of the same table, its fits on each of several
thread counts (whatever their size: the classifier itself runs fits of fewer than
``learners.THREADS_FROM_CELLS`` cells, bags of fewer than ``learners.BAG_THREADS_FROM_CELLS``,
one after another). On a GPU it also times the default
with the learners fitted on a thread beside the model's first passes
(``fitted_table.LEARNERS_BESIDE_A_GPU``, off by default until this has timed it there), and
the default with PU bagging's bags side by side whatever their size, the decision
``learners.BAG_THREADS_FROM_CELLS`` makes from a 2-core machine's timings.
The default and the model alone are also timed with their weights read, checked and built
afresh on every fit, as before verified models were kept (``puicl_model.net.weights``).
Beside the default and PU bagging it times them with scikit-learn's own random forests, the
same trees grown with its per-tree Python (``puicl_model.estimator.direct_forest``), and beside
the default and the logistic learner with ``LogisticRegression.fit`` itself, the same fits with
its checks around them (``puicl_model.estimator.direct_logistic``).
Every setting is timed REPEATS times, the settings taking turns, and the median printed; with
``--profile``, the 25 functions of one default fit that took the most time of their own.

    python -m speed.portfolio_parts                          # the paper's size, 10 columns
    python -m speed.portfolio_parts --device cuda --threads 1,4,16 --profile

The table is :func:`speed.cost_model.table`'s: ``--rows 700 --labeled-share 0.2858
--pool-negatives 0.2`` (the defaults) is the paper's size, 200 labeled positives and a pool of
500 with 20 % negatives.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
from collections.abc import Callable
from unittest.mock import patch

import numpy as np

from speed.bench_model import alternate
from speed.cost_model import table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.portfolio_parts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=700)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--labeled-share", type=float, default=0.2858)
    parser.add_argument("--pool-negatives", type=float, default=0.2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", default="1,2",
                        help="the learners' thread counts to time, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)

    from puicl_model import PUICLClassifier
    from puicl_model.estimator import direct_forest, direct_logistic, fitted_table, learners
    from puicl_model.estimator.learners import (
        BAGGED,
        LOGISTIC,
        CrossFittedLearner,
        learner_encoding,
    )
    from puicl_model.net import weights

    x, s = table(args.rows, args.features, args.labeled_share,
                 pool_negatives=args.pool_negatives)
    labeled = s == 1

    follows = direct_forest.follows_scikit_learn(learners.FOREST_TREES, learners.FOREST_LEAF)

    def forests(direct: bool) -> object:
        """scikit-learn's own forests where ``direct`` is False (the same trees)."""
        return patch.object(direct_forest, "follows_scikit_learn",
                            lambda trees, leaf: direct and follows)

    follows_logistic = direct_logistic.follows_scikit_learn()

    def logistic_fits(direct: bool) -> object:
        """``LogisticRegression.fit`` itself where ``direct`` is False (the same fits)."""
        return patch.object(direct_logistic, "follows_scikit_learn",
                            lambda c, max_iter: direct and follows_logistic)

    def classifier(portfolio: str, beside: bool = False, direct: bool = True,
                   bag_threads: bool = False, reread: bool = False,
                   direct_fits: bool = True) -> Callable[[], object]:
        def fit() -> object:
            # beside: the learners on a thread of their own during the first passes (a GPU's
            # option, fitted_table.LEARNERS_BESIDE_A_GPU; on a CPU the default again);
            # bag_threads: the bags side by side whatever their size; reread: the weights read,
            # checked and built afresh, as every fit did before verified models were kept
            with patch.object(fitted_table, "LEARNERS_BESIDE_A_GPU", beside), forests(direct), \
                    logistic_fits(direct_fits), patch.object(learners, "BAG_THREADS_FROM_CELLS",
                                 0 if bag_threads else learners.BAG_THREADS_FROM_CELLS):
                if reread:
                    weights.VERIFIED_MODELS.clear()
                return PUICLClassifier(random_state=0, portfolio=portfolio, device=args.device,
                                       progress=False).fit(x, s).predict_proba(x[~labeled])
        return fit

    encoded = learner_encoding().fit_transform(x, labeled).astype(np.float64)

    def learner(kind: str, threads: int, direct: bool = True) -> Callable[[], object]:
        def fit() -> object:
            # on exactly `threads` threads, whatever the thresholds say of the fits' size
            with patch.object(learners, "THREADS_FROM_CELLS", 0), \
                    patch.object(learners, "BAG_THREADS_FROM_CELLS", 0), forests(direct), \
                    logistic_fits(direct):
                return CrossFittedLearner(kind, 0, n_threads=threads).fit(
                    encoded[labeled], encoded[~labeled])
        return fit

    jobs = {"default": classifier("auto"), "model alone": classifier("none"),
            "default, learners beside": classifier("auto", beside=True),
            "default, bags on threads": classifier("auto", bag_threads=True),
            "default, beside, bag threads": classifier("auto", beside=True, bag_threads=True),
            "default, sklearn forests": classifier("auto", direct=False),
            "default, sklearn logistic": classifier("auto", direct_fits=False),
            "default, weights reread": classifier("auto", reread=True),
            "model alone, weights reread": classifier("none", reread=True)}
    for threads in (int(v) for v in args.threads.split(",")):
        jobs[f"bagged, {threads} thread(s)"] = learner(BAGGED, threads)
        jobs[f"bagged, {threads}, sklearn forests"] = learner(BAGGED, threads, direct=False)
        jobs[f"logistic, {threads} thread(s)"] = learner(LOGISTIC, threads)
        jobs[f"logistic, {threads}, sklearn fit"] = learner(LOGISTIC, threads, direct=False)
    print(f"{args.rows} rows × {args.features} columns, {int(labeled.sum())} labeled, "
          f"device {args.device}; median of {args.repeats}; forests grown directly: {follows}; "
          f"logistic fitted directly: {follows_logistic}")
    medians = alternate(jobs, args.repeats, statistics.median)
    for name, seconds in medians.items():
        print(f"  {name:28s} {seconds * 1e3:8.1f} ms", flush=True)
    # each way of running the default as a multiple of the model alone (weights kept, and
    # both read afresh on every fit)
    alone = medians["model alone"]
    ratios = [f"{name} {medians[name] / alone:.2f}" for name in medians
              if name.startswith("default") and "reread" not in name]
    afresh = medians["default, weights reread"] / medians["model alone, weights reread"]
    print(f"  × the model alone: {', '.join(ratios)}; both read afresh {afresh:.2f}")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(jobs["default"])
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
