"""Mean AUC and wall time of ensemble settings on the benchmark's dev subset (docs/classifier.md,
"Ensembles"): the numbers to choose ``ensemble.DEFAULT_N_ESTIMATORS`` and the order of
``ensemble.MEMBERS`` with a given checkpoint.

    .venv/bin/python -m studies.ensemble_members --weights DIR
    # a few datasets, and two-member sets that pair the configured view with each member:
    .venv/bin/python -m studies.ensemble_members --datasets diabetes,rice,car \\
        --settings 1,2,3,4,5,base+half-labeled,base+standard-frequency

A setting is either a number ``k`` (``n_estimators=k``: the first ``k`` members of
``ensemble.MEMBERS``) or member names joined by ``+`` (that list, in that order, starting with
``base``; names from ``ensemble.MEMBERS`` or this script's ``CANDIDATES``). The tasks are the
benchmark's (``benchmark.protocol.make_task``, root seed 0, π = 0.5 or ``--pi``; the PUICL
adapter's seed and categorical columns); every setting runs on a task before the next task
starts, so slow and fast moments of a busy host fall on all settings alike. Seconds are fit +
``predict_proba`` of the pool per task (π̂ only with ``--prior``), one process, ``--threads``
torch threads.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods.puicl import as_table
from benchmark.metrics import auc_mann_whitney
from benchmark.protocol import TARGET_PI, make_task, method_seed
from puicl_model import PUICLClassifier
from puicl_model.estimator.ensemble import MEMBERS, Member

# Members tried here before any joins ensemble.MEMBERS: cheaper variants of the power-ordinal
# view, which sees half of the features (about half the cost of a pass; the bar is a
# default ensemble at <= 1.5x the single pass).
CANDIDATES: tuple[Member, ...] = (
    Member("power-ordinal-half-features", numeric="power", categorical="ordinal",
           feature_share=0.5),
    Member("standard-frequency-half-features", numeric="standard", categorical="frequency",
           feature_share=0.5),
)


def classifier_for(setting: str) -> tuple[type[PUICLClassifier], int]:
    """The classifier class and n_estimators of one setting (module docstring)."""
    if setting.isdigit():
        return PUICLClassifier, int(setting)
    by_name = {member.name: member for member in MEMBERS + CANDIDATES}
    names = setting.split("+")
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise SystemExit(f"unknown member(s) {unknown} in setting {setting!r}; known: "
                         f"{', '.join(by_name)}")
    catalogue: tuple[Member, ...] = tuple(by_name[name] for name in names)

    class Trial(PUICLClassifier):
        _member_catalogue = catalogue

    return Trial, len(catalogue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=None,
                        help="checkpoint (default: the bundled one)")
    parser.add_argument("--datasets", default=",".join(DATASET_SLUGS))
    parser.add_argument("--repeats", type=int, default=2, help="repetitions per dataset")
    parser.add_argument("--settings", default="1,2,3,4,5")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--prior", action="store_true", help="also time estimate_class_prior")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--pi", type=float, default=TARGET_PI,
                        help=f"target negative share of each pool (default {TARGET_PI}, §6.1)")
    args = parser.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    classes = {setting: classifier_for(setting) for setting in settings}
    auc: dict[str, list[float]] = defaultdict(list)
    seconds: dict[str, list[float]] = defaultdict(list)
    tasks: list[tuple[str, bool]] = []  # (dataset, has categorical columns) per task, in order
    for slug in args.datasets.split(","):
        dataset = load_dataset(slug, args.data_dir)
        for repetition in range(args.repeats):
            task = make_task(dataset, repetition, 0, target_pi=args.pi)
            table = as_table(task.X, task.categorical)
            labeled = task.s == 1
            pool = table[~labeled]
            seed = method_seed(0, slug, repetition, "puicl")
            tasks.append((slug, any(task.categorical)))
            line = []
            for setting in settings:
                cls, count = classes[setting]
                start = time.perf_counter()
                clf = cls(weights=args.weights, device="cpu", random_state=seed,
                          n_estimators=count, n_threads=args.threads, progress=False)
                proba = clf.fit(table, task.s).predict_proba(pool)[:, 1]
                if args.prior:
                    clf.estimate_class_prior()
                seconds[setting].append(time.perf_counter() - start)
                auc[setting].append(auc_mann_whitney(task.y_unlabeled, proba))
                line.append(f"{setting}: {auc[setting][-1]:.4f}")
            print(f"{slug} rep {repetition}: " + "; ".join(line), flush=True)
    first = settings[0]
    print(f"\n{'setting':<40} {'mean AUC':>9} {'s / task':>9} {'time / ' + first:>12}")
    for setting in settings:
        ratio = np.sum(seconds[setting]) / np.sum(seconds[first])
        print(f"{setting:<40} {np.mean(auc[setting]):>9.4f} {np.mean(seconds[setting]):>9.3f} "
              f"{ratio:>12.2f}")
    # where each setting gains: per dataset, and over tables with and without categorical
    # columns (the encodings the members change matter most for categories)
    frame = pd.DataFrame({setting: auc[setting] for setting in settings})
    frame["dataset"] = [slug for slug, _ in tasks]
    frame["tables"] = ["with categorical columns" if flag else "numeric only"
                       for _, flag in tasks]
    for key in ("dataset", "tables"):
        print(f"\nmean AUC per {key}, and each setting's change from {first}:")
        means = frame.groupby(key)[settings].mean()
        for setting in settings[1:]:
            means[f"Δ {setting}"] = means[setting] - means[first]
        print(means.round(4).to_string())


if __name__ == "__main__":
    main()
