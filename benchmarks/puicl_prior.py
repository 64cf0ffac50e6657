"""Class-prior estimates of one PUICL checkpoint, on benchmark tasks or on synthetic ones.

The π̂ table of docs/classifier.md comes from this script. For each task it fits
``PUICLClassifier`` as the benchmark adapter does, keeps the model's scores that
``estimate_class_prior()`` reads (the pool's P(y=1), and per half of the labeled positives the
held-out half's and the pool's P(y=1) next to the other half), and computes several estimates
of π, the pool's negative share, from them, next to the realized π and the task's AUC:

* ``mean``: the mean of P(y=0) over the pool (the estimate before issue 17);
* ``best_bin``: Best Bin Estimation on the held-out positives' and the pool's scores
  (``puicl_model.prior``), averaged over the two halves;
* ``estimate_class_prior``: what the classifier returns, the larger of the two
  (``puicl_model.prior.class_prior_estimate``);
* ``symmetric``: the pool's mean P(y=1), m_U = α m_P + (1 − α) m_N, solved for α with the
  held-out positives' mean m_P and the assumption m_N = 1 − m_P (the model is as unsure of
  negatives as of positives), per half; the mean where m_P < 0.55 (no signal to invert);
* ``adjusted_mean``: the same equation in P(y=0), with the negatives' mean P(y=0) taken from
  the pool rows that BBE counts as negatives (the BBE share of the pool with the highest
  P(y=0)) instead of assumed: exact where those rows are negatives, and where the model is
  soft (separable classes, yet P(y=0) ≈ 0.3 for positives) the mean is not;
* ``prior_shift_em``: the EM re-estimate of a class prior under prior shift (Saerens, Latinne
  & Decaestecker, Neural Computation 2002), reading the pool's P(y=1) as posteriors under the
  synthetic prior's mean positive share, 0.5.

The tasks are those of ``puicl-bench --pi P`` (same tasks and seeds), or with ``--synthetic
DIR`` the validation tasks of a shard directory (``prior-gen --split val``), whose π is known
exactly; the recipe study's fixed split (configs/paper.yaml's prior, docs/recipe.md) is one.

    python benchmarks/puicl_prior.py --pis 0.2,0.5,0.8 --repeats 2 --jobs 2 \\
        --out bench.csv --scores-out bench_scores
    python benchmarks/puicl_prior.py --synthetic runs/recipe/val_paper_prior \\
        --stages 100,tail --jobs 2 --out synthetic.csv
    python benchmarks/puicl_prior.py --from-scores bench_scores      # no model: seconds
    python benchmarks/puicl_prior.py --from bench.csv --calibrate-on synthetic.csv

The tables printed are the mean |π̂ − π| of each estimate per target π (per stage for synthetic
tasks; with ``oracle(mean|best_bin)``, the better of the two per task, chosen knowing π: no
rule that picks one of them does better), the mean π̂ itself, which shows which way an estimate
misses, and the pool's accuracy and F1 (positive class) under the classifier's two decision
thresholds: P(y=1) > 0.5, and ``threshold="prior"``, which labels the π̂ share of the pool with
the lowest P(y=1) negative (``puicl_model.prior.prior_cut``, with the classifier's π̂).
``--out`` keeps every task's signed estimates and ``--from`` reads them back; ``--scores-out``
keeps every task's scores (one ``.npz`` per task) and ``--from-scores`` recomputes every
estimate from them, so a new rule is compared without scoring again.
``--calibrate-on`` fits linear calibrations of the estimates to π on the tasks of another
``--out`` file (least squares, clipped to [0, 1]), the synthetic ones, where π is known and
which were never benchmark tasks, and adds them to the table as ``calibrated(...)`` columns.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.metrics import roc_auc_score

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods.puicl import as_table
from benchmark.metrics import accuracy, f1_positive
from benchmark.protocol import make_task, method_seed
from puicl_model.prior import (
    Halves,
    best_bin_alpha,
    best_bin_estimate,
    class_prior_estimate,
    mean_estimate,
    prior_cut,
)

MIN_HELD_OUT_MEAN = 0.55  # below it the held-out positives' mean says too little to invert
MIN_SEPARATION = 0.05  # adjusted_mean: below this gap between the two means, the plain mean
SYNTHETIC_POSITIVE_SHARE = 0.5  # the prior's mean positive share of a pool (final stages)
# the estimates each calibration reads: one feature, the other, and both
CALIBRATIONS = (("mean",), ("best_bin",), ("mean", "best_bin"))


def _symmetric(pool: np.ndarray, halves: Halves) -> float:
    alphas = [symmetric_alpha(held, part) for held, part in halves]
    return mean_estimate(pool) if None in alphas else 1.0 - float(np.mean(alphas))


def _adjusted_mean(pool: np.ndarray, halves: Halves) -> float:
    estimates = []
    for held, part in halves:
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


def _prior_shift_em(pool: np.ndarray, halves: Halves) -> float:
    return 1.0 - prior_shift_alpha(pool)


# name -> rule(pool's P(y=1), halves) -> π̂; "estimate_class_prior" is the classifier's own
ESTIMATORS: dict[str, Callable[[np.ndarray, Halves], float]] = {
    "mean": lambda pool, halves: mean_estimate(pool),
    "best_bin": lambda pool, halves: best_bin_estimate(halves),
    "estimate_class_prior": class_prior_estimate,
    "symmetric": _symmetric,
    "adjusted_mean": _adjusted_mean,
    "prior_shift_em": _prior_shift_em,
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


def row(identity: dict, pool: np.ndarray, halves: Halves, y_pool: np.ndarray) -> dict:
    """One task's line of the table: who it is, its π and AUC, every estimate, and the pool's
    accuracy and F1 at each decision threshold."""
    auc = float(roc_auc_score(y_pool, pool)) if 0 < y_pool.sum() < len(y_pool) else None
    estimates = {name: rule(pool, halves) for name, rule in ESTIMATORS.items()}
    by_threshold = {"0.5": (pool > 0.5).astype(np.int64),
                    "prior": prior_cut(pool, estimates["estimate_class_prior"])[0]}
    scores = {}
    for threshold, labels in by_threshold.items():
        scores[f"accuracy@{threshold}"] = accuracy(y_pool, labels)
        scores[f"f1@{threshold}"] = f1_positive(y_pool, labels)
    return {**identity, "pi": float(1.0 - np.mean(y_pool)), "auc": auc, **estimates, **scores}


def scored_row(identity: dict, table, s: np.ndarray, y_pool: np.ndarray, seed: int,
               weights: str | None, scores_out: Path | None,
               n_estimators: int | None = None) -> dict:
    """Fit the classifier to one task, keep its scores (``scores_out``) and estimate π."""
    import torch

    from puicl_model import PUICLClassifier

    torch.set_num_threads(1)
    clf = PUICLClassifier(weights, random_state=seed, n_threads=1, progress=False,
                          n_estimators=n_estimators)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dropped constant columns
        clf.fit(table, s.astype(np.int8))
    pool, halves = clf._pool_probabilities(), clf._held_out_scores()
    result = row(identity, pool, halves, y_pool)
    if scores_out is not None:
        name = f"{identity['dataset']}_{identity['repetition']}_{identity['target_pi']}"
        np.savez_compressed(scores_out / f"{name}.npz".replace(" ", "-"), pool=pool,
                            y_pool=y_pool, **{f"held{k}": h for k, (h, _) in enumerate(halves)},
                            **{f"pool{k}": p for k, (_, p) in enumerate(halves)},
                            **{key: np.asarray(value) for key, value in identity.items()})
    return result


def rescored_row(path: Path) -> dict:
    """A task's line from the scores ``--scores-out`` kept, with no model."""
    with np.load(path) as data:
        identity = {key: data[key].item() for key in ("dataset", "repetition", "target_pi")}
        halves = [(data[f"held{k}"], data[f"pool{k}"]) for k in (0, 1)]
        return row(identity, data["pool"], halves, data["y_pool"])


def benchmark_replicate(slug: str, repetition: int, pi: float, weights: str | None,
                        scores_out: Path | None, n_estimators: int | None = None) -> dict:
    task = make_task(load_dataset(slug), repetition, 0, target_pi=pi)
    identity = {"dataset": slug, "repetition": repetition, "target_pi": pi}
    return scored_row(identity, as_table(task.X, task.categorical), task.s,
                      task.y_true[task.s == 0], method_seed(0, slug, repetition, "puicl"),
                      weights, scores_out, n_estimators)


def synthetic_replicate(task, stage: str, step: int, index: int, weights: str | None,
                        scores_out: Path | None, n_estimators: int | None = None) -> dict:
    s = (np.arange(task.n_rows) < task.n_labeled).astype(np.int8)
    name, repetition = f"synthetic-{stage}", step * 1000 + index
    identity = {"dataset": name, "repetition": repetition, "target_pi": f"stage {stage}"}
    return scored_row(identity, task.x.astype(np.float64), s,
                      np.asarray(task.y[task.n_labeled:], dtype=np.int64),
                      method_seed(0, name, repetition, "puicl"), weights, scores_out,
                      n_estimators)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pis", default="0.2,0.5,0.8")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--repeats", type=int, default=2)
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
    args = parser.parse_args()
    if args.source is not None:
        frame = pd.read_csv(args.source)
    elif args.from_scores is not None:
        paths = sorted(args.from_scores.glob("*.npz"))
        if not paths:
            raise SystemExit(f"error: no .npz scores in {args.from_scores}")
        frame = pd.DataFrame([rescored_row(path) for path in paths])
    else:
        if args.scores_out is not None:
            args.scores_out.mkdir(parents=True, exist_ok=True)
        if args.synthetic is not None:
            jobs = synthetic_jobs(args.synthetic, args.stages, args.steps)
            work = (delayed(synthetic_replicate)(*job, args.weights, args.scores_out,
                                                 args.n_estimators) for job in jobs)
        else:
            slugs = DATASET_SLUGS if args.datasets == "all" else tuple(args.datasets.split(","))
            jobs = [(slug, rep, float(pi)) for pi in args.pis.split(",") for slug in slugs
                    for rep in range(args.repeats)]
            work = (delayed(benchmark_replicate)(*job, args.weights, args.scores_out,
                                                 args.n_estimators) for job in jobs)
        frame = pd.DataFrame(Parallel(n_jobs=args.jobs)(work))
    if args.out:
        frame.to_csv(args.out, index=False)
    columns = [name for name in ESTIMATORS if name in frame]
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
    if {"mean", "best_bin"} <= set(frame):
        # the better of the two per task, chosen knowing π: a floor for every rule that
        # picks one of them, the classifier's "larger of the two" included
        table["oracle(mean|best_bin)"] = (
            frame[["mean", "best_bin"]].sub(frame["pi"], axis=0).abs().min(axis=1)
            .groupby(frame["target_pi"]).mean()
        )
    print(table.round(3).astype(object).T.to_string())
    print("mean π̂ per target π (the realized π first):")
    print(frame.groupby("target_pi")[["pi", *columns]].mean().round(3).T.to_string())
    decisions = [name for name in ("accuracy@0.5", "accuracy@prior", "f1@0.5", "f1@prior")
                 if name in frame]  # absent from an --out file written before they were
    if decisions:
        print("pool accuracy and F1 per decision threshold (0.5, or prior: the π̂ share "
              "negative):")
        print(frame.groupby("target_pi")[decisions].mean().round(3).T.to_string())


if __name__ == "__main__":
    main()
