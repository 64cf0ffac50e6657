"""What the portfolio could read on every table, kept, so that rules and learners are judged on
the same scores on both yardsticks: the development suite's size grid and the generated tables
of ``studies/user_tables.py``.

``collect`` fits the default classifier on a task with every held-out positive and pool row
judged, and keeps per task (one ``.npz``):

* the pool's hidden labels (of the fitted rows, where the pool was sampled);
* the model's P(y = 1) of every fitted pool row, scored as the default scores it;
* the model's evidence: on a table with held-out positives (600 or more labeled), its scores of
  them and of the pool; on a smaller one, the class prior's two cross-fitted folds (each fold's
  positives scored as pool rows next to the other fold), with each fold's mask of the labeled
  rows;
* every learner's out-of-fold log-odds of the labeled rows (in the portfolio's order: held-out
  positives last) and of the pool: the shipped ``logistic`` and ``bagged`` and the bag learners
  of :data:`BAG_VARIANTS`, each on the same bags (folds and drawn pool rows) as ``bagged``, with
  its seconds.

``replay`` (:mod:`studies.portfolio_replay`) reads them.

    python -m studies.portfolio_evidence collect --out results/evidence --suite user
    python -m studies.portfolio_evidence collect --out results/evidence --suite dev \\
        --cells 600:0.2,600:0.5,all:0.2,all:0.5,all:c0.05,all:c0.2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from puicl_model.estimator.learners import (
    BAGGED,
    FOREST_LEAF,
    FOREST_TREES,
    LOGISTIC,
    CrossFittedLearner,
)
from studies.user_yardstick import named_like

# the bag learners judged beside the shipped forest (each a factory of an unfitted model from a
# seed); every one is fitted in the same bags as the shipped member
BAG_VARIANTS: dict[str, Callable[[int], Any]] = {}


def _variant(name: str) -> Callable[[Callable[[int], Any]], Callable[[int], Any]]:
    def register(factory: Callable[[int], Any]) -> Callable[[int], Any]:
        BAG_VARIANTS[name] = factory
        return factory
    return register


@_variant("forest_all")
def _forest_all(seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=10, min_samples_leaf=10, max_features=None,
                                  n_jobs=1, random_state=seed)


@_variant("forest_third")
def _forest_third(seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=10, min_samples_leaf=10, max_features=0.33,
                                  n_jobs=1, random_state=seed)


class _ScreenedForest:
    """The shipped forest's settings on the columns that differ most between the bag's labeled
    and unlabeled rows (an F test per column): at least ``least`` columns, or a ``share`` of
    them on a wider table. A narrow table keeps every column."""

    def __init__(self, seed: int, least: int = 12, share: float = 0.25) -> None:
        self.seed, self.least, self.share = seed, least, share

    def fit(self, x: np.ndarray, target: np.ndarray) -> _ScreenedForest:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.feature_selection import f_classif

        n_columns = x.shape[1]
        keep = max(self.least, int(self.share * n_columns))
        if keep >= n_columns:
            self.columns = np.arange(n_columns)
        else:
            with np.errstate(all="ignore"):
                statistic = np.nan_to_num(f_classif(x, target)[0], nan=0.0)
            self.columns = np.sort(np.argsort(-statistic, kind="stable")[:keep])
        self.forest = RandomForestClassifier(n_estimators=FOREST_TREES,
                                             min_samples_leaf=FOREST_LEAF,
                                             max_features="sqrt", n_jobs=1,
                                             random_state=self.seed)
        self.forest.fit(x[:, self.columns], target)
        self.classes_ = self.forest.classes_
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.forest.predict_proba(x[:, self.columns])


@_variant("forest_screened")
def _forest_screened(seed: int) -> Any:
    return _ScreenedForest(seed)


@_variant("hgb100")
def _hgb100(seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=100, early_stopping=False, random_state=seed)


@_variant("hgb30")
def _hgb30(seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=30, learning_rate=0.2, max_leaf_nodes=15,
                                          early_stopping=False, random_state=seed)


@dataclass
class VariantBags(CrossFittedLearner):
    """PU bagging with another learner in each bag: the shipped member's bags (its folds of the
    positives and its drawn pool rows, under the same keys), another model in them."""

    factory: Callable[[int], Any] | None = None

    def _fitted(self, seed: int, x: np.ndarray, target: np.ndarray) -> Any:
        assert self.factory is not None
        return self.factory(seed).fit(x, target)


@dataclass(frozen=True)
class Task:
    name: str  # the kept file's stem
    group: str  # the cell it is reported in
    X: Any
    s: np.ndarray
    y: np.ndarray
    seed: int


def user_tasks(which: str, repetitions: int) -> list[Callable[[], Task]]:
    from studies.user_tables import make_table
    from studies.user_yardstick import tables

    def build(spec: Any) -> Callable[[], Task]:
        def make() -> Task:
            X, s, y = make_table(spec)
            return Task(spec.name, spec.cell, X, s, y, spec.seed % (2**31 - 1))
        make.name = spec.name  # type: ignore[attr-defined]
        make.group = spec.cell  # type: ignore[attr-defined]
        return make
    return [build(spec) for spec in tables(which, repetitions)]


def chosen_tasks(suite: str, tables: str, cells: str, only: str,
                 repetitions: int = 1) -> list[Callable[[], Task]]:
    """The tasks a study's options name: the generated ``tables`` (``suite`` "user") or the
    size grid's ``cells`` of the development suite ("dev"), those whose name holds one of
    ``only``'s words."""
    makers = (user_tasks(tables, repetitions) if suite == "user"
              else dev_tasks(cells, repetitions))
    return named_like(makers, only)


def dev_tasks(cells: str, repetitions: int) -> list[Callable[[], Task]]:
    from benchmark.devsuite import devsuite_slugs, load_devsuite_table
    from benchmark.methods.puicl import as_table
    from benchmark.protocol import make_task, method_seed
    from benchmark.size_grid import parse_cell
    from studies.portfolio_rule import cell_name

    def build(slug: str, cell: tuple[int, float, float | None],
              repetition: int) -> Callable[[], Task]:
        name = f"{cell_name(*cell)}/{slug}" + (f"@{repetition}" if repetition else "")

        def make() -> Task:
            size, pi, frequency = cell
            task = make_task(load_devsuite_table(slug), repetition, 0, max_positives=size,
                             target_pi=pi, label_frequency=frequency)
            y = np.zeros(len(task.s), dtype=np.int64)
            y[task.s == 1] = 1
            y[task.s == 0] = task.y_unlabeled
            return Task(name, cell_name(*cell), as_table(task.X, task.categorical),
                        np.asarray(task.s, dtype=np.int64), y,
                        method_seed(0, slug, repetition, "puicl"))
        make.name = name  # type: ignore[attr-defined]
        make.group = cell_name(*cell)  # type: ignore[attr-defined]
        return make
    return [build(slug, parse_cell(part), repetition) for repetition in range(repetitions)
            for part in cells.split(",") for slug in devsuite_slugs()]


def _judge_everything() -> None:
    """Every held-out positive and every pool row judged: the replay samples them as a rule
    would."""
    import puicl_model.estimator.evidence_rows as rows

    rows.JUDGED_POOL_ROWS = rows.JUDGED_HELD_OUT = 2**62


def fit_default(task: Task) -> tuple[Any, float]:
    """The default classifier fitted on ``task`` as the studies fit it (its seed, one thread,
    no progress, the table's warnings quiet), and the seconds ``fit`` took."""
    from puicl_model import PUICLClassifier

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = PUICLClassifier(random_state=task.seed, n_threads=1, progress=False).fit(
            task.X, task.s)
    return clf, time.perf_counter() - started


def collect_task(make: Callable[[], Task], out: Path, variants: Sequence[str]) -> str:
    from puicl_model.estimator.pool_sample import sampled_pool_rows
    from puicl_model.estimator.portfolio import MODEL

    path = out / f"{make.name}.npz"  # type: ignore[attr-defined]
    if path.exists():
        return str(path)
    _judge_everything()
    task = make()
    clf, seconds = fit_default(task)
    portfolio = clf.portfolio_
    y_pool = task.y[task.s == 0]
    sample = sampled_pool_rows(len(y_pool), clf.pool_sample, clf.fitted_.entropy)
    if sample is not None:
        y_pool = y_pool[sample]
    arrays: dict[str, np.ndarray] = {
        "y_pool": y_pool, "n_labeled": np.array(int(task.s.sum())), "seconds": np.array(seconds),
        "pi": np.array(1.0 - y_pool.mean()), "group": np.array(task.group)}
    if portfolio is None:  # the model alone (too few labeled or pool rows)
        arrays["model_pool"] = clf.fitted_pool_proba()
        arrays["kind"] = np.array("alone")
        save_kept(path, arrays)
        return str(path)
    if portfolio.n_held:
        evidence = portfolio.evidence
        assert evidence is not None and len(evidence.pool[0][MODEL]) == len(y_pool)
        arrays["kind"] = np.array("held")
        # the evidence: the held-out positives set apart from the passes' context; the pool
        # as the default scores it where its blend weighs the model (the model alone's scores)
        final = portfolio.member_pool_scores.get(MODEL)
        if final is None or len(final) != len(y_pool):
            final = clf.fitted_.model_scores(np.arange(len(y_pool)), clf._runtime())
        else:
            final = _proba(final)
        arrays["model_pool"] = final
        arrays["model_held0"] = _proba(evidence.held[0][MODEL])
        arrays["model_pool0"] = _proba(evidence.pool[0][MODEL])
        n = len(portfolio.x_labeled)
        arrays["mask0"] = np.arange(n - portfolio.n_held, n)
    else:
        arrays["kind"] = np.array("folds")
        arrays["model_pool"] = _proba(portfolio.member_pool_scores[MODEL])
        started = time.perf_counter()
        folds = clf.fitted_._model_folds(2, clf._runtime())
        arrays["folds_seconds"] = np.array(time.perf_counter() - started)
        for k, ((held, pool), mask) in enumerate(zip(folds, clf.fitted_.fold_masks(2),
                                                     strict=True)):
            arrays[f"model_held{k}"], arrays[f"model_pool{k}"] = held, pool
            arrays[f"mask{k}"] = np.flatnonzero(mask)
    for kind in (LOGISTIC, BAGGED):
        arrays[f"{kind}_labeled"] = portfolio.labeled_scores[kind]
        arrays[f"{kind}_pool"] = portfolio.pool_scores[kind]
    for name in variants:
        learner = VariantBags(BAGGED, portfolio.entropy, n_threads=1,
                              factory=BAG_VARIANTS[name])
        started = time.perf_counter()
        labeled, pool = learner.fit(portfolio.x_labeled, portfolio.x_pool)
        arrays[f"{name}_seconds"] = np.array(time.perf_counter() - started)
        arrays[f"{name}_labeled"], arrays[f"{name}_pool"] = labeled, pool
    save_kept(path, arrays)
    return str(path)


def _proba(scores: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(scores, dtype=np.float64)))


def save_kept(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as one compressed ``.npz``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    temporary.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.portfolio_evidence",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("collect",))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--suite", choices=("user", "dev"), default="user")
    parser.add_argument("--tables", default="decision", help="user: decision, unseen, large")
    parser.add_argument("--cells", default="600:0.2,600:0.5,all:0.2,all:0.5,all:c0.05,all:c0.2",
                        help="dev: the size grid's cells")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", default="", help="tasks whose name holds one of these")
    parser.add_argument("--variants", default=",".join(BAG_VARIANTS))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    makers = chosen_tasks(args.suite, args.tables, args.cells, args.only, args.repeats)
    variants = [v for v in args.variants.split(",") if v]
    print(f"portfolio_evidence: {len(makers)} tasks", flush=True)
    if args.jobs == 1:
        for make in makers:
            print(collect_task(make, args.out, variants), flush=True)
    else:
        from joblib import Parallel, delayed

        for done in Parallel(n_jobs=args.jobs, return_as="generator")(
                delayed(collect_task)(make, args.out, variants) for make in makers):
            print(done, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
