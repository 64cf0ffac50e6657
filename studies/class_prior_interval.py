"""How well ``class_prior_report``'s bound, point and interval bracket π on the development suite.

For each task of ``puicl-bench --suite dev`` (tables, repetitions, seeds and π of the suite;
``--max-positives`` for larger tasks than the paper's 600) it fits ``PUICLClassifier`` as the
benchmark adapter does, keeps the scores the report reads (the pool's P(y=1) and the K = 2
cross-fitted folds, ``--scores-out``: one ``.npz`` per task, in the format of
``studies/puicl_prior.py``), and rebuilds the report from them with the classifier's own
seed (``puicl_model.estimator.prior_report.prior_report``; ``--from-scores`` skips the model).
Printed per target π, against the realized π (``task.pi``):

* ``partner``: the share of tasks with positives held out of the passes (600 labeled positives or
  more: its held-out positives are the one fold), ``held_out``: the mean held-out positives;
* ``bound<=pi``: the share of tasks whose identified lower bound is at most π (bar: 95 %);
* ``in[bound,upper]``: the share with π between the bound and the report's upper end (90 %);
* ``MAE point``: mean |π̂ − π| (π̂ is ``estimate_class_prior()``'s, unchanged);
* ``in interval``, ``width``: how often π̂'s bootstrap interval holds π, and its mean width;
  ``width[bound,upper]``: the mean width of the range the report gives π;
* ``flagged``, and the pool's accuracy and F1 (positive class) at the 0.5 cut and at
  ``threshold="prior"`` for flagged and other tasks (what the flag's advice rests on);
* ``share ok``: the share of tasks whose 0.5 cut labels a positive share within
  ``SHARE_SLACK`` (0.10) of the truth; ``said``: where ``predict`` says in one line that its cut
  cannot place the labels, with the report at hand (as ``puicl predict`` checks it) and from
  the pool's probabilities alone (``said (pool)``: what it says before any report);
  ``ok or said`` (``ok or said (pool)``): the share of tasks where one of the two holds.

The benchmark's 20 datasets are never read here.

    python -m studies.class_prior_interval --scores-out dev_prior_scores
    python -m studies.class_prior_interval --from-scores dev_prior_scores   # seconds
    python -m studies.class_prior_interval --repeats 1 --max-positives 3000 \\
        --scores-out dev_prior_scores_3000
    python -m studies.class_prior_interval --repeats 1 --max-positives 3000 \\
        --portfolio none --scores-out dev_prior_scores_3000_alone
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.methods.puicl import as_table
from benchmark.metrics import accuracy, f1_positive
from benchmark.protocol import MAX_POSITIVES, make_task, method_seed
from benchmark.suites import get_suite
from puicl_model.estimator.prior import DEFAULT_FOLDS, prior_cut
from puicl_model.estimator.prior_report import SHARE_SLACK, prior_report, threshold_note

FOLDS_KEY = f"K{DEFAULT_FOLDS}"


def score_task(slug: str, repetition: int, pi: float, max_positives: int, partner: str,
               out: Path) -> Path:
    """Fit the classifier to one suite task and keep the scores its class-prior report reads."""
    import torch

    from puicl_model import PUICLClassifier

    path = out / f"{slug}_{repetition}_{pi}.npz"
    if path.exists():
        return path  # kept by an earlier run: scoring is deterministic
    task = make_task(get_suite("dev").load(slug), repetition, 0, max_positives=max_positives,
                     target_pi=pi)
    seed = method_seed(0, slug, repetition, "puicl")
    torch.set_num_threads(1)
    clf = PUICLClassifier(random_state=seed, n_threads=1, progress=False, portfolio=partner)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dropped constant columns
        clf.fit(as_table(task.X, task.categorical), task.s)
    started = time.perf_counter()
    clf.class_prior_report()  # scores the pool and the folds
    arrays = {f"{FOLDS_KEY}_{part}{i}": pair[j]
              for i, pair in enumerate(clf.held_out_scores(DEFAULT_FOLDS))
              for j, part in enumerate(("held", "pool"))}
    # written whole, then renamed: a run stopped midway leaves no partial .npz to be reused
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as file:
        np.savez_compressed(file, pool=clf.fitted_pool_proba(),
                            y_pool=task.y_true[task.s == 0], dataset=np.asarray(slug),
                            repetition=np.asarray(repetition), target_pi=np.asarray(pi),
                            seconds=np.asarray(time.perf_counter() - started), **arrays)
    os.replace(partial, path)
    return path


def task_row(path: Path) -> dict:
    """One task's report, rebuilt from its kept scores with the classifier's seed."""
    with np.load(path) as data:
        slug, repetition = str(data["dataset"]), int(data["repetition"])
        pool, y_pool = data["pool"], data["y_pool"]
        # K folds, or one where the partner held positives out (tables with >= 600 labeled)
        folds = [(data[f"{FOLDS_KEY}_held{i}"], data[f"{FOLDS_KEY}_pool{i}"])
                 for i in range(DEFAULT_FOLDS) if f"{FOLDS_KEY}_held{i}" in data.files]
        target = float(data["target_pi"])
    report = prior_report(pool, folds, method_seed(0, slug, repetition, "puicl"))
    pi = float(1.0 - np.mean(y_pool))
    bound = report.lower_bound if report.lower_bound is not None else 0.0
    low, high = report.interval
    labels = {"0.5": (pool > 0.5).astype(np.int64), "prior": prior_cut(pool, report.estimate)[0]}
    share_ok = abs(float(np.mean(labels["0.5"])) - float(np.mean(y_pool))) <= SHARE_SLACK
    said = threshold_note(pool, 0.5, report.lower_bound, report) is not None
    said_from_pool = threshold_note(pool, 0.5, None) is not None
    return {"dataset": slug, "repetition": repetition, "target_pi": target, "pi": pi,
            "held_out": sum(len(held) for held, _ in folds), "partner": len(folds) == 1,
            "bound": bound, "point": report.estimate, "low": low, "high": high,
            "upper": report.upper, "flagged": report.poorly_identified,
            "share ok": share_ok, "said": said,
            "said (pool)": said_from_pool, "ok or said": share_ok or said,
            "ok or said (pool)": share_ok or said_from_pool,
            **{f"accuracy@{cut}": accuracy(y_pool, hard) for cut, hard in labels.items()},
            **{f"f1@{cut}": f1_positive(y_pool, hard) for cut, hard in labels.items()}}


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured table: one column per target π and one for all tasks."""
    frame = frame.assign(
        **{"bound<=pi": frame.bound <= frame.pi,
           "in[bound,upper]": (frame.bound <= frame.pi) & (frame.pi <= frame.upper),
           "MAE point": (frame.point - frame.pi).abs(),
           "in interval": (frame.low <= frame.pi) & (frame.pi <= frame.high),
           "width": frame.high - frame.low,
           "width[bound,upper]": frame.upper - frame.bound})
    columns = ["partner", "held_out", "pi", "bound", "bound<=pi", "in[bound,upper]", "point",
               "MAE point", "in interval", "width", "width[bound,upper]", "flagged",
               "share ok", "said", "said (pool)", "ok or said", "ok or said (pool)"]
    table = frame.groupby("target_pi")[columns].mean()
    table.loc["all"] = frame[columns].mean()
    table.insert(0, "tasks", [*frame.groupby("target_pi").size(), len(frame)])
    return table.T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pis", default="0.2,0.5,0.8")
    parser.add_argument("--datasets", default="all", help="comma-separated slugs, or all")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-positives", type=int, default=MAX_POSITIVES)
    parser.add_argument("--portfolio", "--partner", choices=("auto", "none"), default="auto",
                        help="the classifier's portfolio setting (default: its default, auto; "
                        "--partner: its former name)")
    parser.add_argument("--scores-out", type=Path, metavar="DIR",
                        help="score the tasks, keeping their scores here (kept ones are reused)")
    parser.add_argument("--from-scores", type=Path, metavar="DIR",
                        help="read the scores an earlier --scores-out kept; score nothing")
    args = parser.parse_args()
    if (args.scores_out is None) == (args.from_scores is None):
        raise SystemExit("error: give one of --scores-out DIR and --from-scores DIR")
    if args.from_scores is not None:
        paths = sorted(args.from_scores.glob("*.npz"))
        if not paths:
            raise SystemExit(f"error: no .npz scores in {args.from_scores}")
    else:
        args.scores_out.mkdir(parents=True, exist_ok=True)
        slugs = (get_suite("dev").slugs() if args.datasets == "all"
                 else tuple(args.datasets.split(",")))
        paths = [score_task(slug, rep, float(pi), args.max_positives, args.portfolio,
                            args.scores_out)
                 for rep in range(args.repeats) for slug in slugs for pi in args.pis.split(",")]
    frame = pd.DataFrame([task_row(path) for path in paths])
    print(f"{len(frame)} tasks; shares of tasks, mean π and widths per target π:")
    print(summary(frame).round(3).to_string())
    print("pool accuracy and F1 per decision threshold, flagged tasks and the others:")
    grouped = frame.groupby(["target_pi", "flagged"])
    decisions = grouped[["accuracy@0.5", "accuracy@prior", "f1@0.5", "f1@prior"]].mean()
    print(decisions.assign(tasks=grouped.size()).round(3).to_string())


if __name__ == "__main__":
    main()
