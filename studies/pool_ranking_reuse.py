"""Can a shared context's pool ranking reuse the portfolio's cross-fitted logistic scores?

A large table (``large_pool="shared"``, labeled rows and pool together beyond
``single_pass_limit``) has its rows ranked by a logistic regression of the labeled rows against
the pool, cross-fitted in five folds on the model's own encoding of the table
(:mod:`puicl_model.estimator.pool_ranking`); a shared context draws half its pool rows from the
third that ranks least positive. With ``portfolio="auto"`` the portfolio fits a second
cross-fitted logistic regression of labeled against unlabeled rows
(:class:`~puicl_model.estimator.portfolio.Portfolio`, :mod:`~puicl_model.estimator.learners`),
on the learners' own encoding (standardized numbers, missing-value indicators), with the
held-out positives counted as labeled rows (the ranking counts them as pool rows, where the
passes score them) and its folds drawn under another seed key.

Variants of the default classifier, fitted in turn on each task and seed:

* ``shipped``: the ranking as shipped (its own logistic fit, timed: wall and CPU seconds);
* ``reuse``: the ranking taken from the portfolio's logistic out-of-fold scores: the context's
  labeled rows get their out-of-fold scores as labeled rows, the pool its pool scores, and the
  held-out positives (the last rows of the passes' pool) their out-of-fold scores as labeled
  rows. The portfolio's learners are fitted in ``fit`` before the ranking is needed, with the
  same seeds (their scores are the same bytes as when fitted later);
* ``held-labeled`` (a diagnostic between the two): the shipped ranking's own logistic fit, on
  the model's encoding and with its fold seed, but with the held-out positives counted as
  labeled rows, as the portfolio counts them. ``shipped`` to ``held-labeled`` is what counting
  them as labeled changes; ``held-labeled`` to ``reuse`` what the learners' encoding (and
  another fold split) changes.

Made by patching the names ``ranked`` and ``Portfolio`` in
:mod:`puicl_model.estimator.fitted_table` (and, to time it, ``pool_ranking`` in its module);
shipped code unchanged.

Per task and seed, each variant's AUC of

* ``clf``: the classifier's pool probabilities (``predict_and_proba`` of the pool, as the
  benchmark reads them);
* ``model``: the model's own P(y = 1) of a fixed sample of ``--sample`` pool rows (the same
  rows for every seed and variant), scored against the fitted shared contexts: what the
  ranking changes. Where the portfolio's blend does not weigh the model (the logistic learner
  alone, the fallback on tables with held-out positives), ``clf`` reads the model only through
  the blend's choice.

Also, for the shipped fit, how alike the two rankings are: Spearman's correlation of the pool
rows' two scores, and the share of the ranking's least-positive third that the portfolio's
scores also put in their least-positive third.

Tasks: the development suite's tables of at least ``--min-rows`` rows, each with every row at
π = 0.5 (``make_task`` repetition 0, as ``speed/large_tasks.py`` builds them), seeds
``method_seed(seed, slug, 0, "puicl")`` for seed in ``0 .. --seeds - 1`` (seed 0: the
benchmark's). One torch and one OpenMP thread::

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python -m studies.pool_ranking_reuse \\
        --seeds 3 --sample 2000 --out results/pool_ranking_reuse.csv
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

VARIANTS = ("shipped", "reuse", "held-labeled")


class _Timer:
    """Seconds (wall and this process's CPU) spent in the shipped ranking's own fit."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0


@contextlib.contextmanager
def variant(name: str, timer: _Timer) -> Iterator[None]:
    """The fitted-table module with the ranking of ``name`` for the duration of the block."""
    from puicl_model.estimator import fitted_table as fitted_module
    from puicl_model.estimator import pool_ranking as ranking_module
    from puicl_model.estimator.ensemble import with_ranking
    from puicl_model.estimator.learners import LOGISTIC
    from puicl_model.estimator.portfolio import Portfolio

    shipped_ranking, shipped_ranked = ranking_module.pool_ranking, ranking_module.ranked

    def timed_ranking(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return shipped_ranking(*args, **kwargs)
        finally:
            timer.wall += time.perf_counter() - wall
            timer.cpu += time.process_time() - cpu

    built: list[Portfolio] = []

    class RecordedPortfolio(Portfolio):
        @classmethod
        def build(cls, *args: Any, **kwargs: Any) -> Portfolio:
            portfolio = super().build(*args, **kwargs)
            built.append(portfolio)
            return portfolio

    def ranked_from_portfolio(ensemble: Any, settings: Any, entropy: int,
                              n_threads: int | None = None) -> Any:
        rows = ensemble.views[0]
        if (settings.large_pool != "shared"
                or len(rows.x_labeled) + len(rows.x_pool) <= settings.single_pass_limit):
            return ensemble
        if not built:  # no portfolio on this table: the shipped ranking
            return shipped_ranked(ensemble, settings, entropy, n_threads)
        portfolio = built.pop()
        n_context = len(rows.x_labeled)  # the portfolio's labeled rows: context, then held out
        if name == "reuse":
            portfolio.fit_learners()  # every learner, as the choice will read them
            labeled = portfolio.labeled_scores[LOGISTIC]
            pool = portfolio.pool_scores[LOGISTIC]
        else:  # held-labeled: the held-out positives (the pool's last rows) as labeled rows
            n_pool = len(rows.x_pool) - portfolio.n_held
            labeled, pool = shipped_ranking(
                np.concatenate([rows.x_labeled, rows.x_pool[n_pool:]]), rows.x_pool[:n_pool],
                entropy, n_threads)
        pool_score = np.concatenate([pool, labeled[n_context:]])
        assert len(labeled) - n_context == portfolio.n_held
        assert len(pool_score) == len(rows.x_pool)
        return with_ranking(ensemble, labeled[:n_context], pool_score)

    saved = fitted_module.ranked, fitted_module.Portfolio, ranking_module.pool_ranking
    try:
        if name == "shipped":
            ranking_module.pool_ranking = timed_ranking
        else:
            fitted_module.ranked = ranked_from_portfolio
            fitted_module.Portfolio = RecordedPortfolio
        yield
    finally:
        fitted_module.ranked, fitted_module.Portfolio, ranking_module.pool_ranking = saved


def _auc(y: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, scores))


def ranking_agreement(clf: Any) -> tuple[float, float]:
    """Spearman's correlation of the pool rows' shipped ranking and the portfolio's logistic
    scores, and the share of the ranking's least-positive third in the portfolio's."""
    from scipy.stats import spearmanr

    from puicl_model.estimator.learners import LOGISTIC

    portfolio = clf.portfolio_
    shipped = clf.views_[0].pool_score
    labeled = portfolio.labeled_scores[LOGISTIC]
    reused = np.concatenate([portfolio.pool_scores[LOGISTIC],
                             labeled[len(labeled) - portfolio.n_held:]])
    third = len(shipped) // 3
    low_shipped = set(np.argsort(shipped, kind="stable")[:third].tolist())
    low_reused = set(np.argsort(reused, kind="stable")[:third].tolist())
    return (float(spearmanr(shipped, reused).statistic),
            len(low_shipped & low_reused) / max(third, 1))


def measure_task(slug: str, seeds: int, sample: int, pi: float,
                 variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    from benchmark.devsuite import load_devsuite_table
    from benchmark.methods import make_method
    from benchmark.methods.puicl import as_table
    from benchmark.protocol import EVERY_ROW, make_task, method_seed, name_key

    dataset = load_devsuite_table(slug)
    task = make_task(dataset, 0, 0, max_positives=EVERY_ROW, target_pi=pi)
    table = as_table(task.X, task.categorical)
    labeled = task.s == 1
    x_pool = table[~labeled]
    y_pool = task.y_unlabeled
    rows = np.random.default_rng([name_key(slug), 7]).permutation(len(y_pool))[:sample]
    method = make_method("puicl")
    records = []
    for seed in range(seeds):
        for name in variants if seed % 2 == 0 else variants[::-1]:  # alternating turns
            timer = _Timer()
            clf = method.classifier(method_seed(seed, slug, 0, "puicl"))
            with variant(name, timer):
                started = time.perf_counter()
                clf.fit(table, labeled.astype(np.int8))
                fit_s = time.perf_counter() - started
            proba, _ = clf.predict_and_proba(x_pool)
            model = clf.fitted_.model_scores(np.sort(rows), clf._runtime())
            record = {
                "table": slug, "seed": seed, "variant": name, "labeled": int(labeled.sum()),
                "pool": len(y_pool), "held_out": clf.n_held_out_,
                "ranked": clf.views_[0].pool_score is not None,
                "portfolio": clf.portfolio_ is not None,
                "choice": clf.choice_.name if clf.choice_ is not None else "",
                "auc_clf": _auc(y_pool, proba[:, 1]),
                "auc_model": _auc(y_pool[np.sort(rows)], model),
                "fit_s": fit_s, "ranking_fit_s": timer.wall, "ranking_fit_cpu_s": timer.cpu,
                "spearman": np.nan, "low_third_overlap": np.nan,
            }
            if name == "shipped" and record["ranked"] and record["portfolio"]:
                record["spearman"], record["low_third_overlap"] = ranking_agreement(clf)
            records.append(record)
            print(f"{slug:22s} seed {seed} {name:8s} fit {fit_s:6.1f} s  ranking fit "
                  f"{timer.wall:5.2f} s  AUC clf {record['auc_clf']:.4f} model "
                  f"{record['auc_model']:.4f}  {record['choice']}", flush=True)
    return records


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per table: the shipped variant's AUC (mean over seeds), each other variant's mean
    paired difference from it (``_diff``) and on how many seeds it was higher (``_up``), the
    seed noise (the spread, max - min, of the shipped variant's AUC over seeds), and the
    shipped ranking's own fit (seconds, mean over seeds)."""
    out = []
    names = list(frame.variant.unique())
    for slug, rows in frame.groupby("table", sort=False):
        by = {name: rows[rows.variant == name].set_index("seed") for name in names}
        shipped = by["shipped"]
        line: dict[str, Any] = {"table": slug}
        for column in ("auc_clf", "auc_model"):
            line[f"{column}_shipped"] = shipped[column].mean()
            line[f"{column}_noise"] = shipped[column].max() - shipped[column].min()
            for name in names[1:]:
                paired = by[name][column] - shipped[column]
                line[f"{column}_{name}_diff"] = paired.mean()
                line[f"{column}_{name}_up"] = int((paired > 0).sum())
        line["ranking_fit_s"] = shipped.ranking_fit_s.mean()
        line["ranking_fit_cpu_s"] = shipped.ranking_fit_cpu_s.mean()
        for name in names:
            line[f"fit_s_{name}"] = by[name].fit_s.mean()
        line["spearman"] = shipped.spearman.mean()
        line["low_third_overlap"] = shipped.low_third_overlap.mean()
        line["choices"] = "/".join(sorted(set(rows.choice)))
        out.append(line)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sample", type=int, default=2000,
                        help="pool rows per task the model's own AUC is read on")
    parser.add_argument("--min-rows", type=int, default=4000)
    parser.add_argument("--pi", type=float, default=0.5)
    parser.add_argument("--datasets", default=None, help="only these tables, joined by commas")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="joined by commas, shipped first")
    parser.add_argument("--out", type=Path, default=None, help="per-fit records (CSV)")
    args = parser.parse_args(argv)
    variants = tuple(args.variants.split(","))
    if variants[0] != "shipped" or not set(variants) <= set(VARIANTS):
        parser.error(f"--variants: shipped first, then any of {', '.join(VARIANTS[1:])}")

    import torch

    from benchmark.devsuite import devsuite_slugs, resolve_devsuite_dir

    torch.set_num_threads(1)
    sizes = pd.read_csv(resolve_devsuite_dir() / "manifest.csv").set_index("slug")["rows"]
    slugs = [slug for slug in devsuite_slugs() if sizes[slug] >= args.min_rows
             and (args.datasets is None or slug in args.datasets.split(","))]
    records: list[dict] = []
    for slug in slugs:
        records += measure_task(slug, args.seeds, args.sample, args.pi, variants)
        if args.out is not None:  # kept as it grows
            args.out.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(records).to_csv(args.out, index=False)
    frame = pd.DataFrame(records)
    both = frame.groupby("table")[["ranked", "portfolio"]].all().all(axis=1)
    table = summary(frame[frame.table.isin(both[both].index)])
    with pd.option_context("display.width", 400, "display.max_columns", 40,
                           "display.float_format", "{:.4f}".format):
        print(table.to_string(index=False))
    seeds = frame.seed.nunique()
    for name in variants[1:]:
        for column in ("auc_clf", "auc_model"):
            print(f"{name} - shipped, {column}: mean {table[f'{column}_{name}_diff'].mean():+.4f}"
                  f" over {len(table)} tables, higher on {table[f'{column}_{name}_up'].sum()} "
                  f"of {len(table) * seeds} table-seeds; shipped's seed noise "
                  f"{table[f'{column}_noise'].mean():.4f} (mean over tables)")
    print(f"the ranking's own fit: {table.ranking_fit_s.sum():.2f} s wall, "
          f"{table.ranking_fit_cpu_s.sum():.2f} s CPU over {len(table)} tables, mean of seeds "
          f"(per table {table.ranking_fit_s.min():.2f}-{table.ranking_fit_s.max():.2f} s)")


if __name__ == "__main__":
    sys.exit(main())
