"""The portfolio's classical learners: classifiers of labeled (1) against unlabeled (0) rows,
cross-fitted over every row, on an encoding of their own.

Under SCAR, P(labeled | x) ranks rows as P(y = 1 | x) does (Elkan & Noto, KDD 2008), so such a
classifier is a PU learner; cross-fitting scores every row by models that never saw it, so its
scores of labeled rows are held-out evidence beside the pool's
(:mod:`puicl_model.estimator.portfolio` reads them). ``logistic`` is a logistic regression,
``boosted`` scikit-learn's histogram gradient boosting, both cross-fitted in folds of every row.

``bagged`` is PU bagging (Mordelet & Vert, Pattern Recognition Letters 37, 2014) over small
random forests (:data:`FOREST_TREES` trees of at least :data:`FOREST_LEAF` rows a leaf): each
bag fits the labeled positives against as many pool rows drawn with replacement, so every forest
sees a balanced sample where ``boosted`` sees the table's own imbalance, and scores a row by the
log-odds of its forest's probability. Each bag leaves out one fold of the labeled positives, so
that every row, labeled or not, is scored only by bags that did not train on it: a pool row by
the bags that did not draw it (out of bag), a labeled positive by the bags of its fold. Forests
replaced the boosting in the bags: on the development suite they rank the pool better alone and
in the portfolio, at a quarter of the trees' time (docs/decisions.md, "A portfolio chosen per
table"). ``bagged-boosted`` is the same bags over short histogram boostings: on tables with
held-out positives it joins as a member, for wide tables with many uninformative columns, where
the forests' random columns rank worst (docs/decisions.md, "Boosted bags on tables with held-out
positives"). The forests are scikit-learn's trees grown without its forest's per-tree Python
(:mod:`puicl_model.estimator.direct_forest`), the same bytes at about a fifth of the time, and
the logistic regressions are fitted on scikit-learn's loss and optimiser without the checks
around its ``fit`` (:mod:`puicl_model.estimator.direct_logistic`), the same bytes in about 60 %
of the time.

Threads. Every fit runs on one OpenMP (and BLAS) thread, and the fits of the folds or bags run
side by side on a pool of Python threads, one per core (``n_threads`` of them where given): the
trees' compiled loops release the GIL. A team of OpenMP threads per fit, the library's default,
spins at its barriers while it waits for its slowest thread, so on a machine busy with other
work a fit became tens to a hundred times slower (10 fits of 400 × 10 rows beside three busy
processes on 2 cores: 1.4 s on one thread, 38 s with the default, 152 s with two threads).
Separate fits share nothing, so a descheduled thread delays only its own fit. Fits of fewer than
:data:`THREADS_FROM_CELLS` cells (PU bagging's bags: :data:`BAG_THREADS_FROM_CELLS`) run one
after another instead: on so little data the threads mostly wait for each other at the
interpreter's lock. Each fit is seeded by its own key and their results are combined in bag
order, so the scores are the same bytes whatever the number of threads (tested).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from puicl_model.passes import seed_keys

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    from puicl_model.estimator.direct_forest import DirectForest
    from puicl_model.estimator.preprocessing import TablePreprocessor
    from puicl_model.estimator.saved_trees import BoostedTrees, ForestTrees

    # a learner's fitted model: as fit left it, or trees as saved (and loaded)
    LearnerModel = (LogisticRegression | HistGradientBoostingClassifier | BoostedTrees
                    | RandomForestClassifier | DirectForest | ForestTrees)

__all__ = ["BAGGED", "BAGGED_BOOSTED", "BAGS", "BAGS_MANY", "BAGS_MANY_FROM_POOL", "BAG_KINDS",
           "BAG_THREADS_FROM_CELLS", "BOOSTED", "BOOSTED_BAGS_CHOSEN", "BOOSTED_BAG_ITERATIONS",
           "BOOSTED_BAG_LEAVES", "BOOSTED_BAG_RATE", "FOREST_LEAF", "FOREST_TREES",
           "LEARNER_FOLDS", "LOGISTIC", "THREADS_FROM_CELLS", "CrossFittedLearner", "bag_count",
           "encoded_table", "learner_encoding", "log_odds", "row_decision"]

LOGISTIC, BOOSTED, BAGGED = "logistic", "boosted", "bagged"
# PU bagging over boosted trees: BAGGED's bags (its folds of the positives and its drawn pool
# rows, under its key), a short boosting fitted in each in place of the forest. Where held-out
# positives are the evidence it joins the portfolio (portfolio.MEMBERS_WITH_EVIDENCE): on the
# generated tables with many uninformative columns and strong signals it ranked the pool
# 0.03-0.14 above the forests, on the development suite's tables below them, and the evidence
# tells which (docs/decisions.md, "Boosted bags on tables with held-out positives")
BAGGED_BOOSTED = "bagged-boosted"
BAG_KINDS = (BAGGED, BAGGED_BOOSTED)
# spawn-key tags of the learners' fold splits
LEARNER_TAGS = {LOGISTIC: seed_keys.LOGISTIC_FOLDS, BOOSTED: seed_keys.BOOSTED_FOLDS,
                BAGGED: seed_keys.BAGS, BAGGED_BOOSTED: seed_keys.BAGS}
# the learners' cross-fitting folds (for ``bagged``: of the labeled positives)
LEARNER_FOLDS = 5
# PU bagging's bags, a multiple of LEARNER_FOLDS so that every fold of positives is scored by
# as many bags. Five, not the 30 of Mordelet & Vert and of the benchmark's pu-bagging baseline
# (benchmark/methods/pu_bagging.py). Replayed on the development suite's size grid, 10 bags
# ranked as all 30 did; with the small tables' fixed blend, 5 bags rank within 0.001 of 10 in
# every cell (-0.0009 +- 0.0002 at 600 positives and pi 0.2, within the noise elsewhere) and
# leave no cell with more tasks behind its best baseline than before, at half the trees' time
# (docs/decisions.md, "Five bags, ten on large pools without evidence").
BAGS = 5
# both bag learners' bags on a pool of at least BAGS_MANY_FROM_POOL rows where no positives are
# held out (the fixed model-weighted blend, or on the class prior's folds the choice). On such
# tables 10 forest bags against 5 raised the default's pool AUC by +0.0013 +- 0.0005 on 27
# generated tables and the replayed blend by -0.0002 +- 0.0007 on the development suite's 13
# (within its noise), for a few tenths of a second; 10 boosted bags, which the folds judge,
# +0.0017 +- 0.0030 on the same 27 and +0.0051 +- 0.0025 on 28 unseen ones, +0.0002 +- 0.0002 on
# the suite's 20 (none lower): five bags of boosting are too noisy a member for the folds to
# choose it where it ranks the pool best. Where positives are held out, a stronger forest moved
# the evidence's picks and how much of it was read: on the suite's 15 largest tables the default
# took 1.35 times the PU-bagging adapter's time against 1.09, for +0.0009; there both learners
# are judged in BAGS, and the boosted bags grow only once chosen (below). Smaller pools gained
# nothing measurable (docs/decisions.md, "Five bags, ten on large pools without evidence")
BAGS_MANY, BAGS_MANY_FROM_POOL = 10, 2_500
# the boosted bags once the evidence has chosen a blend that weighs them (portfolio.Portfolio.
# strengthen_chosen_bags): refitted with 30 bags, the count of Mordelet & Vert and of the
# benchmark's PU-bagging adapter, whose first BAGS are the judged bags (the same keys). More
# bags of the same learner average more out-of-bag scores: the choice is not revisited. They
# cost nothing where the boosted bags are not chosen, which on the development suite's tables
# with held-out positives is every one (docs/decisions.md, "Five bags, ten on large pools
# without evidence"). On a wide table that reads evidence the boosted bags are judged in as
# many from the start: the evidence scores each labeled positive by the bags that left out its
# fold, a fifth of them, so in 5 bags it judges a noisier learner than the pool's scores average
# (docs/decisions.md, "The wide tables' boosted bags judged in thirty")
BOOSTED_BAGS_CHOSEN = 30
# each bag's random forest: its trees, and the fewest rows a leaf holds. Chosen on the
# development suite's size grid among forests of 10 to 30 trees with leaves of 3 to 20 rows
# (studies/tree_member.py, docs/decisions.md): leaves of 10 rows rank unlabeled pools better
# than smaller ones (the pool's positives are label noise to a bag) and stay above the
# stumps that 20-row leaves make of a bag of a few dozen rows
FOREST_TREES = 10
FOREST_LEAF = 10
# the fewest cells (rows x columns) a fit trains on for the fits to run side by side. Below it
# they run one after another on the calling thread: a small fit is mostly Python, and threads
# that take turns at the interpreter's lock wait for each other. On 2 cores the logistic
# learner's folds took 8 ms on one thread and 15 ms on two at the paper's size (folds of 5,600
# cells), were still slower on two threads at 40,000 cells and faster at 256,000
# (speed/portfolio_parts.py; docs/performance.md, "The default at the paper's size"). Near the
# threshold either way costs a few milliseconds a fit
THREADS_FROM_CELLS = 20_000
# the same for PU bagging's bags. Their forests are grown without scikit-learn's per-tree Python
# (puicl_model.estimator.direct_forest), so most of a bag's time is the tree builder, which
# runs without the interpreter's lock: on 2 cores, bags of 8,000 and 16,000 cells were 33 % and
# 22 % faster on two threads, those of the paper's size (3,200) within 7 %, and bags of 1,280
# cells 35 % slower (speed/portfolio_parts.py; docs/performance.md, "Forests grown directly")
BAG_THREADS_FROM_CELLS = 4_000
# each boosted bag: scikit-learn's histogram gradient boosting of this many iterations at this
# rate, with at most this many leaves a tree (as fast as the forests in a bag of a few thousand
# rows, and within 0.01 of 100 iterations at the default rate on the tables it joins)
BOOSTED_BAG_ITERATIONS, BOOSTED_BAG_RATE, BOOSTED_BAG_LEAVES = 30, 0.2, 15
# the logistic learner's regression: LogisticRegression(C=LOGISTIC_C, max_iter=...), fitted on
# scikit-learn's loss and optimiser directly (puicl_model.estimator.direct_logistic), bit for bit
LOGISTIC_C, LOGISTIC_MAX_ITER = 1.0, 1000

# clip of probabilities before their log-odds are taken
_EPS = 1e-6


def learner_encoding(keep_columns: Sequence[str | int] | None = None) -> TablePreprocessor:
    """The learners' own table encoding (a
    :class:`~puicl_model.estimator.preprocessing.TablePreprocessor`):
    categories one-hot, numbers as given (then centred and scaled), a "was missing" column for
    every column with missing values. The model's normal scores of ranks would bend a linear
    learner's view of an amount."""
    from puicl_model.estimator.preprocessing import TablePreprocessor

    return TablePreprocessor(categorical="onehot", missing="median+indicator", numeric="standard",
                             keep_columns=keep_columns)


def encoded_table(X: Any, labeled: np.ndarray, keep_columns: Sequence[str | int] | None = None,
                  ) -> tuple[TablePreprocessor, np.ndarray]:
    """:func:`learner_encoding` fitted on the table ``X`` (``labeled``: its labeled rows) and
    the table it encodes, in float64. Its notes about columns are quiet: the classifier's own
    encoding of the same table says them."""
    import warnings

    encoder = learner_encoding(keep_columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = encoder.fit_transform(X, labeled).astype(np.float64)
    return encoder, table


Result = TypeVar("Result")


def bag_count(kind: str, pool_rows: int, held_out: bool, wide_evidence: bool = False) -> int:
    """PU bagging's bags for the bag learner ``kind`` on a pool of ``pool_rows`` rows
    (``held_out``: positives are held out as the portfolio's evidence; ``wide_evidence``: the
    table is wide and evidence is read): the boosted bags of a wide table that reads evidence
    are judged in BOOSTED_BAGS_CHOSEN; both learners' grow to BAGS_MANY on large pools
    without held-out positives; elsewhere BAGS (module constants)."""
    if wide_evidence and kind == BAGGED_BOOSTED:
        return BOOSTED_BAGS_CHOSEN
    grows = kind in BAG_KINDS and not held_out and pool_rows >= BAGS_MANY_FROM_POOL
    return BAGS_MANY if grows else BAGS


def available_cores() -> int:
    """The cores this process may run on (its affinity where the system says; else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@functools.cache
def _openmp_controller() -> Any:
    """threadpoolctl's view of the loaded thread pools (OpenMP and BLAS), found once: a fresh
    look at every fit costs milliseconds."""
    import sklearn.ensemble  # noqa: F401  (loads the OpenMP runtime the boosting runs on)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def side_by_side(jobs: Iterable[Callable[[], Result]], workers: int | None) -> list[Result]:
    """Run ``jobs`` on a pool of ``workers`` threads (None: one per core), every one limited
    to one OpenMP and BLAS thread; their results in the jobs' order."""
    def on_one_thread(job: Callable[[], Result]) -> Result:
        # OpenMP's thread count is each thread's own: a pool thread starts at the default
        with _openmp_controller().limit(limits=1, user_api="openmp"):
            return job()

    jobs = list(jobs)
    workers = min(workers or available_cores(), len(jobs)) or 1
    # BLAS's count is the process's: set once, here (with the main thread's OpenMP count)
    with _openmp_controller().limit(limits=1):
        if workers == 1:
            return [job() for job in jobs]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(on_one_thread, jobs))


def log_odds(proba: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(proba, dtype=np.float64), _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


def row_decision(model: LearnerModel, x: np.ndarray) -> np.ndarray:
    """A fitted learner's log-odds of each row of ``x``, the same bits whatever other rows are
    scored with it: a linear model's products summed row by row (a matrix product's blocking,
    and so its last bits, follows the number of rows); the trees score each row on its own (a
    forest, which has no decision function, by the log-odds of its probability)."""
    if hasattr(model, "coef_"):
        return (x * model.coef_[0]).sum(axis=1) + model.intercept_[0]
    if hasattr(model, "decision_function"):
        return model.decision_function(x)
    return log_odds(model.predict_proba(x)[:, 1])


@dataclass
class CrossFittedLearner:
    """A classifier of labeled (1) against unlabeled (0) rows, cross-fitted over every row:
    ``fit`` returns the out-of-fold log-odds of P(labeled | x) of the labeled rows and of the
    pool, ``decision`` scores other rows by the fold models' mean log-odds."""

    kind: str  # LOGISTIC, BAGGED, BAGGED_BOOSTED or BOOSTED
    entropy: int
    folds: int = LEARNER_FOLDS
    # fits run side by side, each on one OpenMP thread (module docstring); None: one per core
    n_threads: int | None = None
    models_: list[Any] = field(default_factory=list)

    def _fitted(self, seed: int, x: np.ndarray, target: np.ndarray) -> Any:
        """A model of this kind, seeded by ``seed``, fitted to ``x`` and ``target``."""
        if self.kind == LOGISTIC:
            from puicl_model.estimator.direct_logistic import fit_logistic

            return fit_logistic(x, target, c=LOGISTIC_C, max_iter=LOGISTIC_MAX_ITER)
        return self._estimator(seed).fit(x, target)

    def _estimator(self, seed: int) -> Any:
        """The unfitted tree learner of this kind (BAGGED, BAGGED_BOOSTED or BOOSTED), seeded
        by ``seed``; the logistic learner's regressions are fitted by :meth:`_fitted` itself."""
        if self.kind == BAGGED:
            from puicl_model.estimator.direct_forest import forest

            return forest(FOREST_TREES, FOREST_LEAF, seed)
        from sklearn.ensemble import HistGradientBoostingClassifier

        # no early stopping: it would hold out a random tenth of each fold's rows
        if self.kind == BAGGED_BOOSTED:
            return HistGradientBoostingClassifier(
                max_iter=BOOSTED_BAG_ITERATIONS, learning_rate=BOOSTED_BAG_RATE,
                max_leaf_nodes=BOOSTED_BAG_LEAVES, early_stopping=False, random_state=seed)
        return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1,
                                              early_stopping=False, random_state=seed)

    def _workers(self, rows: int, columns: int, from_cells: int | None = None) -> int | None:
        """How many jobs of ``rows`` x ``columns`` cells run side by side (None: one per
        core): one at a time below ``from_cells`` (None: THREADS_FROM_CELLS)."""
        from_cells = THREADS_FROM_CELLS if from_cells is None else from_cells
        return self.n_threads if rows * max(columns, 1) >= from_cells else 1

    def _seed(self, *key: int) -> int:
        sequence = np.random.SeedSequence(self.entropy, spawn_key=(LEARNER_TAGS[self.kind], *key))
        return int(sequence.generate_state(1)[0] % 2**31)

    def fit(self, x_labeled: np.ndarray, x_pool: np.ndarray,
            bags: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Out-of-fold log-odds of P(labeled | x): of the labeled rows, then of the pool
        (``bags``: PU bagging's count, None: :data:`BAGS`)."""
        if self.kind in BAG_KINDS:
            return self._fit_bags(np.asarray(x_labeled, np.float64),
                                  np.asarray(x_pool, np.float64), BAGS if bags is None else bags)
        from sklearn.model_selection import StratifiedKFold

        if self.kind == LOGISTIC:  # checked here, before the threads
            from puicl_model.estimator.direct_logistic import follows_scikit_learn

            follows_scikit_learn(LOGISTIC_C, LOGISTIC_MAX_ITER)
        x = np.vstack([x_labeled, x_pool]).astype(np.float64)
        target = np.r_[np.ones(len(x_labeled), np.int64), np.zeros(len(x_pool), np.int64)]
        seed = self._seed()
        split = StratifiedKFold(n_splits=self.folds, shuffle=True, random_state=seed)
        folds = list(split.split(x, target))

        def fold_job(train: np.ndarray, held: np.ndarray) -> Callable[[], tuple[Any, Any]]:
            def job() -> tuple[Any, np.ndarray]:
                model = self._fitted(seed, x[train], target[train])
                return model, row_decision(model, x[held])
            return job

        fitted = side_by_side((fold_job(train, held) for train, held in folds),
                              self._workers(len(folds[0][0]), x.shape[1]))
        scores = np.empty(len(x))
        self.models_ = []
        for (_, held), (model, held_scores) in zip(folds, fitted, strict=True):
            scores[held] = held_scores
            self.models_.append(model)
        return scores[: len(x_labeled)], scores[len(x_labeled):]

    def _fit_bags(self, x_labeled: np.ndarray, x_pool: np.ndarray, count: int,
                  ) -> tuple[np.ndarray, np.ndarray]:
        """PU bagging with ``count`` bags: bag b trains on the labeled positives outside fold
        ``b % folds`` against as many pool rows drawn with replacement (its own key), and
        scores that fold's positives and the pool rows it did not draw. A pool row that every
        bag drew (a chance of about 0.63 ** count) is scored by all of them, as a new row
        would be."""
        if self.kind == BAGGED:
            from puicl_model.estimator.direct_forest import follows_scikit_learn

            follows_scikit_learn(FOREST_TREES, FOREST_LEAF)  # checked here, before the threads
        n_labeled, n_pool = len(x_labeled), len(x_pool)
        fold = np.random.default_rng(self._seed()).permutation(n_labeled) % self.folds
        bag_rows = 2 * min(int((fold != 0).sum()), n_pool)
        bags = side_by_side((self._bag_job(bag, fold, x_labeled, x_pool) for bag in range(count)),
                            self._workers(bag_rows, x_pool.shape[1], BAG_THREADS_FROM_CELLS))
        labeled_sum, pool_sum = np.zeros(n_labeled), np.zeros(n_pool)
        labeled_count, pool_count = np.zeros(n_labeled), np.zeros(n_pool)
        self.models_ = []
        for bag, (model, out_of_bag, pool_scores, held_scores) in enumerate(bags):
            # summed in bag order: the same bytes whatever thread finished first
            if out_of_bag.any():
                pool_sum[out_of_bag] += pool_scores
                pool_count[out_of_bag] += 1
            held = fold == bag % self.folds
            labeled_sum[held] += held_scores
            labeled_count[held] += 1
            self.models_.append(model)
        never_out = pool_count == 0
        pool_scores = pool_sum / np.maximum(pool_count, 1)
        if never_out.any():
            pool_scores[never_out] = self.decision(x_pool[never_out])
        return labeled_sum / labeled_count, pool_scores

    def _bag_job(self, bag: int, fold: np.ndarray, x_labeled: np.ndarray, x_pool: np.ndarray,
                 ) -> Callable[[], tuple[Any, np.ndarray, np.ndarray, np.ndarray]]:
        """Bag ``bag``'s fit: the model, its out-of-bag mask of the pool, its scores of those
        pool rows and of its fold's labeled positives."""
        def job() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
            held = fold == bag % self.folds
            n_train, bag_seed = int((~held).sum()), self._seed(bag)
            size = min(n_train, len(x_pool))
            drawn = np.random.default_rng(bag_seed).integers(0, len(x_pool), size)
            target = np.r_[np.ones(n_train, np.int64), np.zeros(size, np.int64)]
            model = self._fitted(bag_seed, np.vstack([x_labeled[~held], x_pool[drawn]]),
                                 target)
            out_of_bag = np.ones(len(x_pool), dtype=bool)
            out_of_bag[drawn] = False
            pool_scores = (row_decision(model, x_pool[out_of_bag]) if out_of_bag.any()
                           else np.empty(0))
            return model, out_of_bag, pool_scores, row_decision(model, x_labeled[held])
        return job

    def decision(self, x: np.ndarray) -> np.ndarray:
        """The fitted models' mean log-odds of each row of ``x``, summed model by model: a
        row's bits do not depend on how many rows are scored with it (``np.mean`` over a
        stack sums a single row's column pairwise, a larger block's rows one by one)."""
        x = np.asarray(x, dtype=np.float64)
        decisions = side_by_side(((lambda model=model: row_decision(model, x))
                                  for model in self.models_), self._workers(*x.shape))
        total = np.zeros(len(x), dtype=np.float64)
        for decision in decisions:  # in the models' order
            total += decision
        return total / len(self.models_)
