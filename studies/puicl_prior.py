"""Class-prior estimates of one PUICL checkpoint on the development suite (or synthetic tasks).

The π̂ tables of docs/classifier_measurements.md come from this script. For each task it fits
``PUICLClassifier`` as the benchmark adapter does, keeps the model's scores that the estimators
read — the pool's P(y=1) and, for each fold count K of ``--folds``, the cross-fitted scores of
:mod:`puicl_model.estimator.prior` (per fold: the held-out positives' and the pool's P(y=1) from the
same passes) — and computes every estimate of π, the pool's negative share, from them, next to
the realized π (``task.pi``) and the task's AUC. With ``--legacy`` (on by default) it also keeps
the scores of the rule before cross-fitting: two halves of the labeled positives, each scored
as new rows next to the other half, and the pool scored next to that half.

Estimates (:mod:`puicl_model.estimator.prior`, :mod:`studies.dedpul`; each rule but ``mean`` is
computed per K, as ``rule/K``):

* ``mean``: the mean of P(y=0) over the pool;
* ``best_bin``: Best Bin Estimation (Garg et al., NeurIPS 2021), averaged over the folds;
* ``dedpul``: DEDPUL (Ivanov, NeurIPS 2020), averaged over the folds (``dedpul(t)``: with the
  EM step's tolerance t instead of the default);
* ``max(mean,best_bin)``, ``max(mean,dedpul)``: the larger of the two;
* ``estimate_class_prior``: what the classifier returns (``class_prior_estimate``);
* ``symmetric``: m_U = α m_P + (1 − α)(1 − m_P) solved for α (m_P: the held-out positives'
  mean P(y=1)); ``adjusted_mean``: the same equation in P(y=0) with the negatives' mean taken
  from the pool rows BBE counts as negative; ``prior_shift_em``: Saerens, Latinne &
  Decaestecker's EM (Neural Computation 2002) with the synthetic prior's positive share 0.5;
* ``legacy``: the rule before cross-fitting, max(mean, BBE on the halves scored as new rows).

Tasks are those of ``puicl-bench --suite dev --pi P`` (same tables, repetitions and seeds as the
suite's AUC figures), or with ``--synthetic DIR`` the validation tasks of a shard directory.
The benchmark's 20 datasets are never scored here: every choice is made on the suite.

    python -m studies.puicl_prior --pis 0.2,0.5,0.8 --repeats 2 --folds 2,3,5 --jobs 2 \\
        --out dev.csv --scores-out dev_scores
    python -m studies.puicl_prior --from-scores dev_scores     # no model: seconds
    python -m studies.puicl_prior --synthetic runs/recipe/val_paper_prior --jobs 2 \\
        --out synthetic.csv
    python -m studies.puicl_prior --from dev.csv --calibrate-on synthetic.csv

Printed: the mean |π̂ − π| of each estimate per target π (``oracle(mean|best_bin)``: the better
of the two per task, chosen knowing π), the mean π̂ itself, and the pool's accuracy and F1
(positive class) at the two decision thresholds, P(y=1) > 0.5 and ``threshold="prior"`` (the
π̂ share of the pool with the lowest P(y=1) negative, ``puicl_model.estimator.prior.prior_cut``,
with the classifier's π̂). ``--out`` keeps every task's estimates, ``--from`` reads them back;
``--scores-out`` keeps every task's scores (one ``.npz`` per task) and ``--from-scores``
recomputes every estimate from them, so a new rule is compared without scoring again.
``--calibrate-on`` fits linear maps of the estimates to π on another ``--out`` file (least
squares, clipped to [0, 1]) and adds them as ``calibrated(...)`` columns.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.metrics import roc_auc_score

from benchmark.methods.puicl import as_table
from benchmark.metrics import accuracy, f1_positive
from benchmark.protocol import make_task, method_seed
from benchmark.suites import get_suite
from puicl_model.estimator.prior import (
    DEFAULT_FOLDS,
    Folds,
    best_bin_alpha,
    best_bin_estimate,
    class_prior_estimate,
    mean_estimate,
    prior_cut,
)
from puicl_model.passes import seed_keys
from puicl_model.passes.planning import ViewRows
from puicl_model.passes.query_rows import score_new_rows
from studies.dedpul import dedpul_estimate

MIN_HELD_OUT_MEAN = 0.55  # below it the held-out positives' mean says too little to invert
MIN_SEPARATION = 0.05  # adjusted_mean: below this gap between the two means, the plain mean
SYNTHETIC_POSITIVE_SHARE = 0.5  # the prior's mean positive share of a pool (final stages)
# the estimates each calibration reads: one feature, the other, and both
CALIBRATIONS = (("mean",), ("best_bin/2",), ("mean", "best_bin/2"))
# the spawn-key tag of the legacy rule's halves, as the classifier had it: the key (11,), apart
# from the folds' (11, n_folds) (puicl_model.passes.seed_keys)
LEGACY_TAG = seed_keys.PRIOR_FOLDS


def _symmetric(pool: np.ndarray, folds: Folds) -> float:
    alphas = [symmetric_alpha(held, part) for held, part in folds]
    return mean_estimate(pool) if None in alphas else 1.0 - float(np.mean(alphas))


def _adjusted_mean(pool: np.ndarray, folds: Folds) -> float:
    estimates = []
    for held, part in folds:
        negative_held, negative_pool = 1.0 - held, np.sort(1.0 - part)[::-1]
        count = round((1.0 - best_bin_alpha(held, part)) * len(part))
        if count == 0:
            estimates.append(0.0)
            continue
        m_p, m_u = float(np.mean(negative_held)), float(np.mean(negative_pool))
        m_n = float(np.mean(negative_pool[:count]))
        if m_n - m_p < MIN_SEPARATION:
            estimates.append(m_u)
            continue
        estimates.append(float(np.clip((m_u - m_p) / (m_n - m_p), 0.0, 1.0)))
    return float(np.mean(estimates))


# name -> rule(pool's P(y=1), folds) -> π̂, each computed per fold count K
ESTIMATORS: dict[str, Callable[[np.ndarray, Folds], float]] = {
    "best_bin": lambda pool, folds: best_bin_estimate(folds),
    "dedpul": lambda pool, folds: dedpul_estimate(folds),
    "dedpul(0.003)": lambda pool, folds: dedpul_estimate(folds, 0.003),
    "dedpul(0.03)": lambda pool, folds: dedpul_estimate(folds, 0.03),
    "max(mean,best_bin)": lambda pool, folds: max(mean_estimate(pool),
                                                  best_bin_estimate(folds)),
    "max(mean,dedpul)": lambda pool, folds: max(mean_estimate(pool), dedpul_estimate(folds)),
    "estimate_class_prior": class_prior_estimate,
    "symmetric": _symmetric,
    "adjusted_mean": _adjusted_mean,
}


def symmetric_alpha(held: np.ndarray, pool: np.ndarray) -> float | None:
    """α from m_U = α m_P + (1 − α)(1 − m_P); None where m_P is too close to 0.5."""
    m_p, m_u = float(np.mean(held)), float(np.mean(pool))
    if m_p < MIN_HELD_OUT_MEAN:
        return None
    return float(np.clip((m_u + m_p - 1.0) / (2.0 * m_p - 1.0), 0.0, 1.0))


def prior_shift_alpha(posteriors: np.ndarray, trained_alpha: float = SYNTHETIC_POSITIVE_SHARE,
                      iterations: int = 1000, tolerance: float = 1e-8) -> float:
    """Saerens et al.'s EM: rescale the posteriors to a new prior α until α is their mean."""
    q = np.clip(np.asarray(posteriors, dtype=np.float64), 1e-6, 1 - 1e-6)
    alpha = float(np.mean(q))
    for _ in range(iterations):
        up = alpha / trained_alpha * q
        down = (1.0 - alpha) / (1.0 - trained_alpha) * (1.0 - q)
        new = float(np.mean(up / (up + down)))
        if abs(new - alpha) < tolerance:
            return new
        alpha = new
    return alpha


def estimates(pool: np.ndarray, by_folds: dict[int, Folds],
              legacy: Folds | None) -> dict[str, float]:
    """Every estimate of one task: ``mean``, each rule per fold count (``rule/K``), the
    prior-shift EM, and the legacy rule where its scores were kept."""
    result = {"mean": mean_estimate(pool), "prior_shift_em": 1.0 - prior_shift_alpha(pool)}
    for k, folds in sorted(by_folds.items()):
        for name, rule in ESTIMATORS.items():
            result[f"{name}/{k}"] = rule(pool, folds)
    if legacy is not None:
        result["legacy"] = max(result["mean"], best_bin_estimate(legacy))
    return result


def row(identity: dict, pool: np.ndarray, by_folds: dict[int, Folds], y_pool: np.ndarray,
        legacy: Folds | None = None, default_folds: int | None = None) -> dict:
    """One task's line of the table: who it is, its π and AUC, every estimate, and the pool's
    accuracy and F1 at each decision threshold (the prior cut with the classifier's π̂ at
    ``default_folds``, the default fold count when None; the legacy rule's without folds)."""
    auc = float(roc_auc_score(y_pool, pool)) if 0 < y_pool.sum() < len(y_pool) else None
    values = estimates(pool, by_folds, legacy)
    k = default_folds or (DEFAULT_FOLDS if DEFAULT_FOLDS in by_folds else min(by_folds, default=0))
    # scores kept before cross-fitting hold only the legacy halves: their rule's π̂
    pi_hat = values.get(f"estimate_class_prior/{k}", values.get("legacy", values["mean"]))
    by_threshold = {"0.5": (pool > 0.5).astype(np.int64), "prior": prior_cut(pool, pi_hat)[0]}
    scores = {}
    for threshold, labels in by_threshold.items():
        scores[f"accuracy@{threshold}"] = accuracy(y_pool, labels)
        scores[f"f1@{threshold}"] = f1_positive(y_pool, labels)
    return {**identity, "pi": float(1.0 - np.mean(y_pool)), "auc": auc, **values, **scores}


def legacy_halves(clf) -> Folds:
    """The scores of the rule before cross-fitting: per half of the labeled positives, its
    rows' P(y=1) scored as new rows, and the pool's, both next to the other half."""
    rng = np.random.default_rng(np.random.SeedSequence(clf.planner_.entropy,
                                                       spawn_key=(LEGACY_TAG,)))
    half = rng.permutation(len(clf.x_labeled_)) % 2
    scores = []
    for k in (0, 1):
        context = [np.ascontiguousarray(v.x_labeled[half != k]) for v in clf.views_]
        held = [np.ascontiguousarray(v.x_labeled[half == k]) for v in clf.views_]
        subs = [dataclasses.replace(p, n_labeled=len(context[0])) for p in clf.planners_]
        pool, _ = clf.scorer_(subs, [ViewRows(c, v.x_pool)
                                     for c, v in zip(context, clf.views_, strict=True)])
        held_scores = score_new_rows(clf.model_, [ViewRows(c, v.x_pool) for c, v
                                                  in zip(context, clf.views_, strict=True)],
                                     held, subs, device=clf.device_, n_threads=clf.n_threads,
                                     progress=False)
        scores.append((held_scores, pool))
    return scores


def scored_row(identity: dict, table, s: np.ndarray, y_pool: np.ndarray, seed: int,
               options: argparse.Namespace) -> dict:
    """Fit the classifier to one task, keep its scores (``options.scores_out``) and estimate
    π; the seconds each scoring took go into the row (``seconds_pool``, ``seconds_K``)."""
    import torch

    from puicl_model import PUICLClassifier

    torch.set_num_threads(1)
    clf = PUICLClassifier(options.weights, random_state=seed, n_threads=1, progress=False,
                          n_estimators=options.n_estimators)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dropped constant columns
        clf.fit(table, s.astype(np.int8))
    seconds = {}
    started = time.perf_counter()
    pool = clf.fitted_pool_proba()
    seconds["seconds_pool"] = time.perf_counter() - started
    by_folds = {}
    for k in options.folds:
        started = time.perf_counter()
        by_folds[k] = clf.held_out_scores(k)
        seconds[f"seconds_{k}"] = time.perf_counter() - started
    legacy = legacy_halves(clf) if options.legacy else None
    result = {**row(identity, pool, by_folds, y_pool, legacy), **seconds}
    if options.scores_out is not None:
        name = f"{identity['dataset']}_{identity['repetition']}_{identity['target_pi']}"
        arrays = {f"K{k}_{part}{i}": pair[j] for k, folds in by_folds.items()
                  for i, pair in enumerate(folds) for j, part in enumerate(("held", "pool"))}
        for i, (held, part) in enumerate(legacy or []):
            arrays[f"held{i}"], arrays[f"pool{i}"] = held, part
        np.savez_compressed(options.scores_out / f"{name}.npz".replace(" ", "-"), pool=pool,
                            y_pool=y_pool, **arrays,
                            **{key: np.asarray(value) for key, value in identity.items()})
    return result


def read_scores(path: Path) -> tuple[dict, np.ndarray, np.ndarray, dict[int, Folds],
                                     Folds | None]:
    """A task's kept scores: identity, pool, y_pool, cross-fitted folds per K, legacy."""
    with np.load(path) as data:
        identity = {key: data[key].item() for key in ("dataset", "repetition", "target_pi")}
        by_folds: dict[int, Folds] = {}
        for key in data.files:
            if key.startswith("K") and "_held" in key:
                k, index = int(key[1:key.index("_")]), int(key.rsplit("held", 1)[1])
                by_folds.setdefault(k, {})[index] = (data[key], data[key.replace("held",
                                                                                 "pool")])
        folds = {k: [parts[i] for i in sorted(parts)] for k, parts in by_folds.items()}
        legacy = ([(data[f"held{i}"], data[f"pool{i}"]) for i in (0, 1)]
                  if "held0" in data.files else None)
        return identity, data["pool"], data["y_pool"], folds, legacy


def rescored_row(path: Path) -> dict:
    """A task's line from the scores ``--scores-out`` kept, with no model."""
    identity, pool, y_pool, folds, legacy = read_scores(path)
    return row(identity, pool, folds, y_pool, legacy)


def suite_replicate(suite: str, slug: str, repetition: int, pi: float,
                    options: argparse.Namespace) -> dict:
    task = make_task(get_suite(suite).load(slug), repetition, 0, target_pi=pi)
    identity = {"dataset": slug, "repetition": repetition, "target_pi": pi}
    return scored_row(identity, as_table(task.X, task.categorical), task.s,
                      task.y_true[task.s == 0], method_seed(0, slug, repetition, "puicl"),
                      options)


def synthetic_replicate(task, stage: str, step: int, index: int,
                        options: argparse.Namespace) -> dict:
    s = (np.arange(task.n_rows) < task.n_labeled).astype(np.int8)
    name, repetition = f"synthetic-{stage}", step * 1000 + index
    identity = {"dataset": name, "repetition": repetition, "target_pi": f"stage {stage}"}
    return scored_row(identity, task.x.astype(np.float64), s,
                      np.asarray(task.y[task.n_labeled:], dtype=np.int64),
                      method_seed(0, name, repetition, "puicl"), options)


def synthetic_jobs(directory: Path, stages: str, steps: str) -> list[tuple]:
    """(task, stage, step, index) of every validation task asked for, each step read once."""
    from prior_gen.shards import open_shards

    reader = open_shards(directory, "val")
    first, _, last = steps.partition("-")
    chosen = range(int(first), int(last or first) + 1)
    wanted = stages.split(",")
    missing = {stage: reader.missing_steps(stage, chosen) for stage in wanted}
    missing = {stage: m for stage, m in missing.items() if m}
    if missing:
        raise SystemExit(f"error: {directory} (val split) lacks steps {missing}; generate them "
                         f"with {reader.generate_command(','.join(missing))}")
    return [(task, stage, step, index) for stage in wanted for step in chosen
            for index, task in enumerate(reader.read_step(stage, step))]


def _design(frame: pd.DataFrame, features: tuple[str, ...]) -> np.ndarray:
    return np.column_stack([np.ones(len(frame)), *(frame[f] for f in features)])


def fit_calibration(frame: pd.DataFrame, features: tuple[str, ...]) -> np.ndarray:
    """Least-squares coefficients [intercept, *features] of π on the estimates."""
    coefficients, *_ = np.linalg.lstsq(_design(frame, features), frame["pi"].to_numpy(),
                                       rcond=None)
    return coefficients


def apply_calibration(frame: pd.DataFrame, features: tuple[str, ...],
                      coefficients: np.ndarray) -> pd.Series:
    return pd.Series(np.clip(_design(frame, features) @ coefficients, 0.0, 1.0),
                     index=frame.index)


def error_table(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    errors = frame[columns].sub(frame["pi"], axis=0).abs()
    errors["target_pi"] = frame["target_pi"]
    table = errors.groupby("target_pi").mean()
    table.insert(0, "tasks", frame.groupby("target_pi").size())
    table.insert(1, "auc", frame.groupby("target_pi")["auc"].mean())
    return table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pis", default="0.2,0.5,0.8")
    parser.add_argument("--suite", default="dev", choices=("dev",),
                        help="the tables (the development suite; the benchmark's datasets "
                        "never enter a choice)")
    parser.add_argument("--datasets", default="all", help="comma-separated slugs, or all")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--folds", default="2,3,5",
                        help="the fold counts K of the cross-fitted scores (comma-separated)")
    parser.add_argument("--legacy", action=argparse.BooleanOptionalAction, default=True,
                        help="also keep the scores of the rule before cross-fitting")
    parser.add_argument("--synthetic", type=Path, metavar="DIR",
                        help="score the validation tasks of this shard directory instead")
    parser.add_argument("--stages", default="100,tail",
                        help="with --synthetic: the validation stages (default 100,tail)")
    parser.add_argument("--steps", default="0",
                        help="with --synthetic: the validation steps, N or A-B (default 0)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--weights", help="a weights directory (default: the bundled model)")
    parser.add_argument("--n-estimators", type=int, default=None,
                        help="ensemble members (default: the classifier's, which depends on "
                        "the table; 1: the single pass)")
    parser.add_argument("--out", type=Path, help="write every task's estimates to this CSV")
    parser.add_argument("--scores-out", type=Path, metavar="DIR",
                        help="keep every task's scores in this directory (one .npz per task)")
    parser.add_argument("--from", dest="source", type=Path, metavar="CSV",
                        help="read the per-task estimates of an earlier --out, score nothing")
    parser.add_argument("--from-scores", type=Path, metavar="DIR",
                        help="recompute every estimate from an earlier --scores-out")
    parser.add_argument("--calibrate-on", type=Path, metavar="CSV",
                        help="fit linear calibrations on this --out file (synthetic tasks) and "
                             "add them to the table")
    return parser


def scored_frame(args: argparse.Namespace) -> pd.DataFrame:
    """Every task's row: scored by the model, or read back from ``--from``/``--from-scores``."""
    if args.source is not None:
        return pd.read_csv(args.source)
    if args.from_scores is not None:
        paths = sorted(args.from_scores.glob("*.npz"))
        if not paths:
            raise SystemExit(f"error: no .npz scores in {args.from_scores}")
        return pd.DataFrame([rescored_row(path) for path in paths])
    args.folds = [int(k) for k in args.folds.split(",")]
    if args.scores_out is not None:
        args.scores_out.mkdir(parents=True, exist_ok=True)
    if args.synthetic is not None:
        jobs = synthetic_jobs(args.synthetic, args.stages, args.steps)
        work = (delayed(synthetic_replicate)(*job, args) for job in jobs)
    else:
        slugs = (get_suite(args.suite).slugs() if args.datasets == "all"
                 else tuple(args.datasets.split(",")))
        jobs = [(args.suite, slug, rep, float(pi)) for pi in args.pis.split(",")
                for slug in slugs for rep in range(args.repeats)]
        work = (delayed(suite_replicate)(*job, args) for job in jobs)
    return pd.DataFrame(Parallel(n_jobs=args.jobs)(work))


def main() -> None:
    args = _parser().parse_args()
    frame = scored_frame(args)
    if args.out:
        frame.to_csv(args.out, index=False)
    rules = ("mean", "prior_shift_em", "legacy", *ESTIMATORS)
    columns = [c for c in frame.columns if c.split("/")[0] in rules]
    if args.calibrate_on is not None:
        training = pd.read_csv(args.calibrate_on)
        for features in CALIBRATIONS:
            coefficients = fit_calibration(training, features)
            name = f"calibrated({'+'.join(features)})"
            frame[name] = apply_calibration(frame, features, coefficients)
            columns.append(name)
            terms = " ".join(f"{c:+.3f}·{f}" for c, f in zip(coefficients[1:], features,
                                                           strict=True))
            print(f"{name}: π̂ = {coefficients[0]:.3f} {terms} on {len(training)} tasks")
    print("mean |π̂ − π| per target π:")
    table = error_table(frame, columns)
    if {"mean", "best_bin/2"} <= set(frame):
        # the better of the two per task, chosen knowing π: a floor for every rule that
        # picks one of them
        table["oracle(mean|best_bin/2)"] = (
            frame[["mean", "best_bin/2"]].sub(frame["pi"], axis=0).abs().min(axis=1)
            .groupby(frame["target_pi"]).mean()
        )
    print(table.round(3).astype(object).T.to_string())
    print("mean π̂ per target π (the realized π first):")
    print(frame.groupby("target_pi")[["pi", *columns]].mean().round(3).T.to_string())
    timing = [c for c in frame.columns if c.startswith("seconds_")]
    if timing:
        print("mean seconds per scoring (pool: predict_proba's; K: the K-fold scores):")
        print(frame.groupby("target_pi")[timing].mean().round(2).T.to_string())
    decisions = [name for name in ("accuracy@0.5", "accuracy@prior", "f1@0.5", "f1@prior")
                 if name in frame]
    if decisions:
        print("pool accuracy and F1 per decision threshold (0.5, or prior: the π̂ share "
              "negative):")
        print(frame.groupby("target_pi")[decisions].mean().round(3).T.to_string())


if __name__ == "__main__":
    main()
