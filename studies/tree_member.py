"""Other tree learners in PU bagging's place, scored beside the kept members.

PU bagging's trees were most of the default's time at the paper's size (docs/performance.md,
"The default at the paper's size"). This study fits other tree learners in each bag, with the
same bags (the same positives' folds, the same pool rows drawn under the same keys) on the same
encoding, for the tasks kept by ``studies/portfolio_rule.py collect``, and writes each kept task
again with the variants' held-out and pool scores beside the kept members (as
``bagged_<variant>``), so that ``studies/rule_candidates.py`` replays every rule with each of
them as the tree member. Each task is rebuilt as the collect's classifier built it (its pool
sample, its held-out positives), and refused unless the learner PU bagging ran when the task
was kept (``--kept-with``) gives the kept ``bagged10`` scores again, bit for bit.

Usage (docs/decisions.md, "A portfolio chosen per table"; tasks kept before the forests were
shipped were kept with ``hgb100``)::

    python -m studies.tree_member --kept results/portfolio --out results/tree_member \
        --cells 600_pi0.2,600_pi0.5,all_pi0.2,all_pi0.5,all_c0.05,all_c0.2 \
        --kept-with hgb100 --variants hgb30,forest10,forest10leaf10,forest10leaf20 --jobs 2
    python -m studies.rule_candidates --kept results/tree_member \
        --grid docs/benchmark/size_grid/grid.csv --grid results/yard/default/grid.csv \
        --rules "trees alone" --out results/tree_member/rules.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.devsuite import load_devsuite_table
from benchmark.methods.puicl import as_table
from benchmark.protocol import make_task, method_seed
from benchmark.size_grid import parse_cell
from puicl_model.estimator.input_checks import root_seed
from puicl_model.estimator.learners import (
    BAGGED,
    BAGS,
    FOREST_LEAF,
    FOREST_TREES,
    CrossFittedLearner,
)
from puicl_model.estimator.portfolio import Portfolio
from puicl_model.estimator.prior import fold_of
from puicl_model.passes.settings import InferenceSettings
from studies.portfolio_rule import REPETITION_MARK

# the bags of the kept member a rebuilt task must reproduce: PU bagging's first 10 bags of the
# collect (the classifier's count when the tasks were kept)
KEPT_BAGS = 10
REFERENCE = f"{BAGGED}{KEPT_BAGS}"


def _boosted(max_iter: int, learning_rate: float) -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(max_iter=max_iter, learning_rate=learning_rate,
                                              early_stopping=False, random_state=seed)
    return make


def _forest(extra: bool, trees: int, leaf: int,
            features: str | float | None = "sqrt") -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

        kind = ExtraTreesClassifier if extra else RandomForestClassifier
        return kind(n_estimators=trees, min_samples_leaf=leaf, max_features=features, n_jobs=1,
                    random_state=seed)
    return make


# the variants, each a learner in every bag and a count of bags: the boosted trees PU bagging
# ran before (the kept scores of a collect before the forests were shipped), cheaper boosting,
# forests of several sizes (``forest10leaf10``: FOREST_TREES and FOREST_LEAF, in the bags the
# tasks were kept with; ``forest10leaf10x5``: the shipped member), and cheaper learners in as
# many bags as the benchmark's PU bagging
VARIANTS: Mapping[str, tuple[Callable[[int], Any], int]] = {
    "hgb100": (_boosted(100, 0.1), KEPT_BAGS),
    "hgb30": (_boosted(30, 0.3), KEPT_BAGS),
    "hgb30x30": (_boosted(30, 0.3), 30),
    "extra20": (_forest(True, 20, 3), KEPT_BAGS),
    "forest10": (_forest(False, 10, 3), KEPT_BAGS),
    "forest10all": (_forest(False, 10, 3, None), KEPT_BAGS),
    "forest30": (_forest(False, 30, 3), KEPT_BAGS),
    "forest10leaf10": (_forest(False, FOREST_TREES, FOREST_LEAF), KEPT_BAGS),
    "forest10leaf20": (_forest(False, 10, 20), KEPT_BAGS),
    "forest20leaf10": (_forest(False, 20, 10), KEPT_BAGS),
    # the same forests in half the bags (BAGS): the shipped member, except on a pool of
    # learners.BAGS_MANY_FROM_POOL rows or more without held-out positives
    "forest10leaf10x5": (_forest(False, FOREST_TREES, FOREST_LEAF), BAGS),
    # as many trees as the shipped member, in twice the bags
    "forest5leaf10": (_forest(False, 5, FOREST_LEAF), KEPT_BAGS),
}
# the variant a kept task's own PU bagging ran: a collect's kept scores were made with it
KEPT_WITH, FORMER = "forest10leaf10", "hgb100"
# the variant the classifier's PU bagging runs (learners.BAGS, FOREST_TREES, FOREST_LEAF), except
# on a pool of learners.BAGS_MANY_FROM_POOL rows or more without held-out positives
SHIPPED = "forest10leaf10x5"


@dataclass
class VariantLearner(CrossFittedLearner):
    """PU bagging (its bags, folds and keys) with another learner in each bag."""

    make: Callable[[int], Any] | None = None

    def _estimator(self, seed: int) -> Any:
        assert self.make is not None
        return self.make(seed)


def rebuild(path: Path) -> tuple[Portfolio, list[np.ndarray]]:
    """The kept task's portfolio encoding (nothing fitted), as the collect's classifier built
    it (its pool sampled where that is larger than the classifier's sample, its held-out
    positives last), and per fold of evidence its labeled rows (those held out of the passes on
    a large table, else the class prior's two folds)."""
    from puicl_model.estimator.pool_sample import fitted_table
    from puicl_model.estimator.portfolio_gate import held_out_mask

    slug, _, repetition_text = path.stem.partition(REPETITION_MARK)
    repetition = int(repetition_text or 0)
    cap, pi, frequency = parse_cell(path.parent.name.replace("_pi", ":").replace("_c", ":c"))
    task = make_task(load_devsuite_table(slug), repetition, 0, max_positives=cap, target_pi=pi,
                     label_frequency=frequency)
    entropy = root_seed(method_seed(0, slug, repetition, "puicl"))
    table, labeled = as_table(task.X, task.categorical), task.s == 1
    sampled = fitted_table(table, labeled, InferenceSettings().pool_sample, entropy)
    if sampled is not None:
        table, labeled = sampled
    held = held_out_mask(int(labeled.sum()), entropy)
    portfolio = Portfolio.build(table, labeled, held, entropy, None, n_threads=1)
    n_labeled = len(portfolio.x_labeled)
    if held is not None:
        return portfolio, [np.arange(n_labeled) >= n_labeled - portfolio.n_held]
    fold = fold_of(n_labeled, 2, entropy)
    return portfolio, [fold == k for k in range(2)]


def score_task(path: Path, out: Path, variants: Sequence[str], kept_with: str = KEPT_WITH) -> str:
    """The kept task at ``path`` written under ``out`` with each variant's scores added (the
    held-out scores per fold of the class prior, the pool's), and the seconds each took; a task
    written before gains only the variants it lacks. The variant ``kept_with`` (PU bagging's
    learner when the task was kept) must give the kept scores again, or the task is refused."""
    target = out / path.parent.name / path.name
    with np.load(target if target.exists() else path) as data:
        kept = dict(data)
    variants = [variant for variant in variants if f"final_{BAGGED}_{variant}" not in kept]
    if not variants:
        return f"{target} kept"
    variants = sorted(variants, key=lambda variant: variant != kept_with)  # the check first
    if "folds" not in kept:  # no portfolio ran: copied as it is, so that its cell is whole
        _write(target, kept)
        return f"{target} (no portfolio)"
    portfolio, folds = rebuild(path)
    for variant in variants:
        make, bags = VARIANTS[variant]
        learner = VariantLearner(BAGGED, portfolio.entropy, n_threads=1, make=make)
        began = time.perf_counter()
        labeled, pool = learner.fit(portfolio.x_labeled, portfolio.x_pool, bags=bags)
        kept[f"seconds_{BAGGED}_{variant}"] = np.array(time.perf_counter() - began)
        if variant == kept_with and not (np.array_equal(pool, kept[f"final_{REFERENCE}"]) and all(
                np.array_equal(labeled[rows], kept[f"held{k}_{REFERENCE}"])
                for k, rows in enumerate(folds))):
            raise SystemExit(f"tree_member: {path}: the rebuilt task does not give the kept "
                             f"{REFERENCE} scores")
        for k, rows in enumerate(folds):
            kept[f"held{k}_{BAGGED}_{variant}"] = labeled[rows]
            kept[f"pool{k}_{BAGGED}_{variant}"] = pool
        kept[f"final_{BAGGED}_{variant}"] = pool
    _write(target, kept)
    return str(target)


def _write(target: Path, arrays: Mapping[str, np.ndarray]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    temporary.replace(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.tree_member",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", type=Path, required=True,
                        help="the OUT of studies.portfolio_rule collect")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cells", required=True, help="kept cells, joined by commas")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--kept-with", default=KEPT_WITH,
                        help=f"the variant PU bagging ran when the tasks were kept ({FORMER}: "
                             "before the forests were shipped); it is fitted and checked first")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    variants = list(dict.fromkeys([args.kept_with, *args.variants.split(",")]))
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: no variant {unknown[0]!r} (known: {', '.join(VARIANTS)})")
    paths = [path for cell in args.cells.split(",")
             for path in sorted((args.kept / cell).glob("*.npz"))]
    if not paths:
        parser.error(f"--cells: no kept task under {args.kept} in {args.cells}")
    from joblib import Parallel, delayed

    for done, line in enumerate(Parallel(n_jobs=args.jobs, return_as="generator")(
            delayed(score_task)(path, args.out, variants, args.kept_with) for path in paths),
            start=1):
        print(f"[{done}/{len(paths)}] {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
