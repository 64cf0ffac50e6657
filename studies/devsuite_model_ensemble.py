"""Several trained models, and the average of their probabilities, on the development suite
(docs/recipe.md, "Prior v2"): whether models trained on different priors fail on different
tables, so that together they rank better than each alone.

Each task of ``puicl-bench --suite dev`` (the same tables, repetitions, π and seeds as the
suite's figures) is scored by every ``--weights`` with the classifier's single pass
(``n_estimators=1``, the prior study's yardstick; the classifier's other defaults), and by
means of their P(positive): every ``--mean NAME=A+B`` (default: one ``mean`` of all). The
paired difference by table against the first model is printed for each model and each mean.
Two seeds of one prior next to two different priors tell the gain of averaging from the gain
of diversity:

    python -m studies.devsuite_model_ensemble --out ensemble.csv \\
        --weights v1=runs/prior_study/v1_prior_seed1/weights \\
        --weights eta=runs/prior_study/eta_wide/weights \\
        --weights eta_seed1=runs/prior_study/eta_wide_seed1/weights \\
        --weights families=runs/prior_study/families/weights \\
        --mean seeds=eta+eta_seed1 --mean priors=eta+families
    python -m studies.devsuite_model_ensemble --summarize ensemble.csv   # the table again

The cost of the mean is the sum of its members' passes: a diagnostic of what the priors hold
between them, not a default.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.methods.puicl import as_table
from benchmark.metrics import auc_mann_whitney
from benchmark.protocol import PUTask, make_task, method_seed
from benchmark.summary import summary_markdown
from puicl_common.atomic import atomic_write_text

PIS = (0.2, 0.5, 0.8)


def parse_weights(items: list[str]) -> dict[str, Path]:
    """``LABEL=DIR`` pairs, in order; a missing directory or a repeated label is refused."""
    models: dict[str, Path] = {}
    for item in items:
        label, sep, directory = item.partition("=")
        if not sep or not label or not directory:
            raise SystemExit(f"--weights {item!r}: expected LABEL=DIR")
        if label in models:
            raise SystemExit(f"--weights {item!r}: the label {label!r} is taken")
        if not Path(directory).is_dir():
            raise SystemExit(f"--weights {item!r}: {directory} is not a directory")
        models[label] = Path(directory)
    if len(models) < 2:
        raise SystemExit("give at least two --weights LABEL=DIR")
    return models


def parse_means(items: list[str], models: dict[str, Path]) -> dict[str, list[str]]:
    """``NAME=A+B`` averages of the models' labels, in order; default one ``mean`` of all."""
    if not items:
        return {"mean": list(models)}
    means: dict[str, list[str]] = {}
    for item in items:
        name, sep, members = item.partition("=")
        labels = members.split("+")
        if not sep or not name or len(labels) < 2:
            raise SystemExit(f"--mean {item!r}: expected NAME=A+B[+...]")
        if name in models or name in means:
            raise SystemExit(f"--mean {item!r}: the name {name!r} is taken")
        unknown = [label for label in labels if label not in models]
        if unknown:
            raise SystemExit(f"--mean {item!r}: no --weights labelled {', '.join(unknown)}")
        means[name] = labels
    return means


def pool_scores(task: PUTask, weights: Path, seed: int) -> np.ndarray:
    """P(positive) of the task's pool by one model's single pass (the adapter's inputs, without
    its π̂)."""
    from puicl_model import PUICLClassifier

    labeled = task.s.astype(bool)
    table = as_table(task.X, task.categorical)
    clf = PUICLClassifier(weights=weights, random_state=seed, n_threads=1, progress=False,
                          n_estimators=1)
    clf.fit(table, labeled.astype(np.int8))
    return np.asarray(clf.predict_proba(table[~labeled]), dtype=np.float64)[:, 1]


def score(models: dict[str, Path], means: dict[str, list[str]], slugs: list[str],
          repetitions: int, root_seed: int) -> pd.DataFrame:
    rows = []
    for number, slug in enumerate(slugs, 1):
        table = load_devsuite_table(slug)
        for repetition in range(repetitions):
            seed = method_seed(root_seed, slug, repetition, "puicl")
            for pi in PIS:
                task = make_task(table, repetition, root_seed, target_pi=pi)
                scores = {label: pool_scores(task, weights, seed)
                          for label, weights in models.items()}
                for name, labels in means.items():
                    scores[name] = np.mean([scores[label] for label in labels], axis=0)
                rows += [{"dataset": slug, "repetition": repetition, "pi_target": pi,
                          "method": label, "auc": auc_mann_whitney(task.y_unlabeled, values)}
                         for label, values in scores.items()]
        print(f"[{number}/{len(slugs)}] {slug}", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame) -> str:
    """The suite's table (benchmark.summary.summary_markdown) of every model and every mean:
    AUC per π, the figure ± SE, and the difference from the first model paired by table."""
    grouped = frame.groupby(["dataset", "method", "pi_target"], sort=False)["auc"]
    per_table = grouped.mean().to_frame().assign(repetitions=grouped.size()).reset_index()
    return summary_markdown(per_table, list(dict.fromkeys(frame.method)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", action="append", default=[], metavar="LABEL=DIR",
                        help="a model; the first is the reference of the paired differences")
    parser.add_argument("--mean", action="append", default=[], metavar="NAME=A+B",
                        help="an average of models' probabilities (repeatable; default: all)")
    parser.add_argument("--out", type=Path, help="per-task CSV to write")
    parser.add_argument("--datasets", default="all",
                        help="comma-separated suite tables (default: all 40)")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="puicl-bench's root seed")
    parser.add_argument("--summarize", type=Path, metavar="CSV",
                        help="print the table of an --out file and exit")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(pd.read_csv(args.summarize)))
        return 0
    if args.out is None:
        parser.error("--out is required unless --summarize is given")
    models = parse_weights(args.weights)
    means = parse_means(args.mean, models)
    suite = list(devsuite_slugs())
    slugs = suite if args.datasets == "all" else args.datasets.split(",")
    unknown = sorted(set(slugs) - set(suite))
    if unknown:
        parser.error(f"--datasets: not in the development suite: {', '.join(unknown)}")
    warnings.filterwarnings("ignore", category=UserWarning)
    frame = score(models, means, slugs, args.repetitions, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, frame.to_csv(index=False))
    print(summarize(frame))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
