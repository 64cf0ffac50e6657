"""Cost estimate of a benchmark run: one replicate per method on chosen datasets, timed.

    python -m benchmark.costs --datasets magic,spambase
    python -m benchmark.costs --methods vpu --variant "vpu_6x300=vpu:{hidden: [300,300,300]}"

Prints fit+predict seconds per method and dataset, each method's ratio to the cheapest
method measured in the same run (ratios are what survives a noisy shared machine), and the
projected core-hours of a 20 × 10 run (every task of a large dataset is capped at 1000 rows,
so one large-dataset replicate bounds the cost of any replicate). ``--variant LABEL=METHOD:
{settings}`` adds a method with changed settings (YAML flow mapping), to time a deviation
from the authors' defaults side by side with the setting we use.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import yaml
from threadpoolctl import threadpool_limits

from benchmark.datasets import DATASET_SLUGS, load_dataset
from benchmark.methods import METHOD_NAMES, make_method
from benchmark.protocol import make_task, method_seed
from benchmark.runner import expand_names


def _parse_variant(text: str) -> tuple[str, str, dict]:
    label, _, rest = text.partition("=")
    method, _, settings = rest.partition(":")
    if not label or method not in METHOD_NAMES:
        raise SystemExit(f"--variant {text!r}: expected LABEL=METHOD:{{settings}}")
    overrides = yaml.safe_load(settings) if settings.strip() else {}
    if not isinstance(overrides, dict):
        raise SystemExit(f"--variant {text!r}: settings must be a mapping")
    return label, method, overrides


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmark.costs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="magic,spambase")
    parser.add_argument("--methods", default=",".join(m for m in METHOD_NAMES if m != "puicl"))
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--weights", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = [(name, name, {}) for name in expand_names(args.methods, METHOD_NAMES, "method")]
    runs += [_parse_variant(v) for v in args.variant]
    datasets = expand_names(args.datasets, DATASET_SLUGS, "dataset")
    seconds: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    # One BLAS thread, as inside the runner's worker processes.
    with threadpool_limits(limits=1):
        _time_all(datasets, runs, args, seconds)
    mean = {label: sum(v) / len(v) for label, v in seconds.items()}
    cheapest = min(mean.values())
    print("\nmethod          mean s   ratio to cheapest   20x10 bound (core-h)")
    for label in mean:
        print(f"{label:>12s} {mean[label]:8.2f} {mean[label] / cheapest:12.1f}x "
              f"{mean[label] * 200 / 3600:16.2f}")
    return 0


def _time_all(datasets: Sequence[str], runs: list[tuple[str, str, dict]],
              args: argparse.Namespace, seconds: dict[str, list[float]]) -> None:
    for slug in datasets:
        task = make_task(load_dataset(slug), 0, args.seed)
        for label, name, overrides in runs:
            method = make_method(name, weights=args.weights, overrides=overrides)
            start = time.perf_counter()
            method.fit_predict(task.X, task.s, method_seed(args.seed, slug, 0, name))
            seconds[label].append(time.perf_counter() - start)
            print(f"{slug:>14s} {label:>12s} {seconds[label][-1]:7.2f} s "
                  f"({task.X.shape[0]} rows x {task.X.shape[1]} features)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
