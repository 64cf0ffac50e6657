"""Seconds of PUICL's default and of Elkan–Noto on the development suite's largest tables,
each task built with every row (docs/performance.md, "The portfolio on large tables"), or on
every table at another cap (``--max-positives 600 --min-rows 0 --pi 0.2``: the paper's
protocol).

What the benchmark times per replicate (``benchmark.runner.evaluate_replicate``: fit, the
pool's probabilities and labels, π̂), summed over the tables of at least ``--min-rows`` rows,
one thread, the methods taking turns table by table so that a drift of the machine's speed
falls on all of them alike. Another checkout's classifier is timed by running this file
with that checkout first on the path::

    .venv/bin/python -m speed.large_tasks --methods puicl,elkan-noto
    PYTHONPATH=/path/to/other/checkout .venv/bin/python speed/large_tasks.py --methods puicl

A method may carry settings of its own after a colon (the adapter's ``--method-config``
settings, ``key=value`` joined by ``+``), so that two settings of one method take turns::

    .venv/bin/python -m speed.large_tasks \
        --methods puicl:large_pool=chunks,puicl:large_pool=shared

Prints one line per table and method (seconds, AUC) and the totals.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="puicl,elkan-noto")
    parser.add_argument("--min-rows", type=int, default=4000)
    parser.add_argument("--pi", type=float, default=0.5)
    parser.add_argument("--datasets", default=None,
                        help="only these development-suite tables, joined by commas")
    parser.add_argument("--max-positives", default="all",
                        help="the cap on a task's positives ('all': every row; 600: the paper's "
                        "protocol, with --min-rows 0 and --pi 0.2 its reference cell)")
    args = parser.parse_args()

    import torch
    import yaml

    from benchmark.devsuite import devsuite_slugs, load_devsuite_table, resolve_devsuite_dir
    from benchmark.protocol import make_task, method_seed, parse_max_positives
    from benchmark.runner import evaluate_replicate

    def variant(text: str) -> tuple[str, dict | None]:
        """``method`` or ``method:key=value+key=value`` -> the method and its settings."""
        name, _, settings = text.partition(":")
        if not settings:
            return name, None
        pairs = (item.split("=", 1) for item in settings.split("+"))
        return name, {key: yaml.safe_load(value) for key, value in pairs}

    torch.set_num_threads(1)
    rows = pd.read_csv(resolve_devsuite_dir() / "manifest.csv").set_index("slug")["rows"]
    slugs = [slug for slug in devsuite_slugs() if rows[slug] >= args.min_rows
             and (args.datasets is None or slug in args.datasets.split(","))]
    methods = args.methods.split(",")
    totals = dict.fromkeys(methods, 0.0)
    cap = parse_max_positives(args.max_positives)
    for slug in slugs:
        task = make_task(load_devsuite_table(slug), 0, 0, max_positives=cap, target_pi=args.pi)
        for method in methods:
            started = time.perf_counter()
            name, overrides = variant(method)
            record = evaluate_replicate(task, name, method_seed(0, slug, 0, name),
                                        overrides=overrides)
            seconds = time.perf_counter() - started
            totals[method] += seconds
            print(f"{slug:24s} {method:12s} {seconds:8.2f} s  AUC {record['auc']:.4f}",
                  flush=True)
    for method, seconds in totals.items():
        print(f"total {method}: {seconds:.1f} s over {len(slugs)} tables")
    if len(methods) > 1:
        first = methods[0]
        for method in methods[1:]:
            print(f"ratio {first} / {method}: {totals[first] / max(totals[method], 1e-9):.1f}")


if __name__ == "__main__":
    main()
