"""AUC of one PUICL checkpoint under different table preprocessings, on the development suite
(where the defaults are decided) or on the benchmark's tasks.

Each variant is a ``PUICLClassifier(categorical=..., numeric=...)`` setting; categorical
columns are declared to the classifier as in ``puicl-bench`` (the loader's flags). Tasks, seeds
and metric are ``puicl-bench``'s (paper §6.1, Mann–Whitney AUC on the unlabeled pool), at
each π of ``--pis``. Printed: each variant's mean AUC per π, and its difference from the first
variant paired by table (± the standard error across tables). The figures of
docs/classifier_measurements.md ("Column rules") come from the first command; those of
docs/model_card/v0.md (chosen on the benchmark, before the suite existed) from the last.

    python -m studies.puicl_preprocessing --n-estimators 1 --repeats 2 \\
        --variants onehot/quantile,onehot/power,onehot/standard
    python -m studies.puicl_preprocessing --suite benchmark --repeats 3
"""

from __future__ import annotations

import argparse

import pandas as pd
from joblib import Parallel, delayed

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from benchmark.methods.puicl import as_table
from benchmark.metrics import auc_mann_whitney
from benchmark.protocol import make_task, method_seed
from benchmark.summary import paired_difference

VARIANTS = ("ordinal/standard", "ordinal/quantile", "onehot/quantile")


def replicate(suite: str, slug: str, repetition: int, pi: float, weights: str | None,
              variants: list[str], n_estimators: int | None) -> list[dict]:
    import torch

    from puicl_model import PUICLClassifier

    torch.set_num_threads(1)
    dataset = load_devsuite_table(slug) if suite == "dev" else load_dataset(slug)
    task = make_task(dataset, repetition, 0, target_pi=pi)
    unlabeled = task.s == 0
    table = as_table(task.X, task.categorical)
    rows = []
    for variant in variants:
        categorical, numeric = variant.split("/")
        clf = PUICLClassifier(weights=weights, categorical=categorical, numeric=numeric,
                              random_state=method_seed(0, slug, repetition, "puicl"),
                              n_estimators=n_estimators, n_threads=1,
                              progress=False).fit(table, task.s)
        score = clf.predict_proba(table[unlabeled])[:, 1]
        rows.append({"dataset": slug, "repetition": repetition, "pi_target": pi,
                     "variant": variant,
                     "auc": auc_mann_whitney(task.y_true[unlabeled], score)})
    return rows


def report(frame: pd.DataFrame, variants: list[str]) -> None:
    """Mean AUC per variant and π, and each variant's difference from the first, paired by
    table (the mean over a table's repetitions and π), ± the standard error across tables."""
    print(frame.pivot_table(index="variant", columns="pi_target", values="auc")
          .loc[variants].round(4).to_string())
    by_method = frame.rename(columns={"variant": "method"})
    per_table = by_method.pivot_table(index="dataset", columns="method", values="auc")
    for variant in variants[1:]:
        mean, error = paired_difference(by_method, variant, variants[0])
        gains = int((per_table[variant] > per_table[variants[0]]).sum())
        print(f"{variant} - {variants[0]}: {mean:+.4f} ± {error:.4f} "
              f"({gains} of {len(per_table)} tables gain)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("dev", "benchmark"), default="dev",
                        help="dev: the development suite (decisions); benchmark: the paper's "
                        "20 datasets (reports)")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--pis", default=None,
                        help="comma-separated target π (default: 0.2,0.5,0.8 for dev, 0.5 for "
                        "the benchmark)")
    parser.add_argument("--n-estimators", type=int, default=None,
                        help="ensemble members (default: the classifier's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--weights", default=None, help="checkpoint (default: the bundled one)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated categorical/numeric settings")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    every = devsuite_slugs() if args.suite == "dev" else DATASET_SLUGS
    slugs = every if args.datasets == "all" else args.datasets.split(",")
    pis = ([0.2, 0.5, 0.8] if args.suite == "dev" else [0.5]) if args.pis is None else [
        float(pi) for pi in args.pis.split(",")
    ]
    variants = args.variants.split(",")
    results = Parallel(n_jobs=args.jobs)(
        delayed(replicate)(args.suite, slug, rep, pi, args.weights, variants, args.n_estimators)
        for slug in slugs for rep in range(args.repeats) for pi in pis
    )
    report(pd.DataFrame([row for rows in results for row in rows]), variants)


if __name__ == "__main__":
    main()
