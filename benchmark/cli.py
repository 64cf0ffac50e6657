"""``puicl-bench``: run the PU benchmark of paper §6 and write its reports.

Example (the full baseline run of docs/benchmark.md)::

    puicl-bench --methods ulsif,empu,vpu,tedn,nnpu,elkan-noto --datasets all --repeats 10 \\
        --jobs 2 --out results/baselines

Rerunning the same command resumes from ``OUT/cache`` (only missing replicates are computed);
``--report-only`` rewrites the reports from the cache without computing anything.
``--import-results CSV`` seeds the cache from a published results.csv first
(benchmark/imports.py), e.g. a new PUICL column next to the committed baselines::

    puicl-bench --methods all --datasets all --repeats 10 --jobs 2 --out results/v1 \\
        --weights runs/puicl-v1/weights --import-results docs/benchmark/results.csv
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmark.datasets import DATASET_SLUGS, DataError
from benchmark.imports import ImportSummary
from benchmark.labeling import LABELINGS, SCAR, parse_labeling
from benchmark.methods import METHOD_NAMES, MissingLibraryError, MissingWeightsError
from benchmark.protocol import (
    MAX_POSITIVES,
    TARGET_PI,
    parse_label_frequency,
    parse_max_positives,
)
from benchmark.report import records_frame, write_reports
from benchmark.runner import RunSpec, expand_names, import_published, plan_run, run
from benchmark.suites import SUITES, get_suite
from benchmark.summary import write_summary
from puicl_common.configio import ConfigError, load_yaml
from puicl_common.output_paths import check_output_path, os_error_message

# the pool compositions of the development suite's figure: few, half and mostly negatives
DEV_PIS = (0.2, 0.5, 0.8)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="puicl-bench",
        description="PU benchmark of the PUICL paper (§6, Table 1): 20 UCI datasets, PUICL "
        "and the baselines, AUC / accuracy / F1; or the same protocol on the development suite "
        "(--suite dev), where the project's decisions are made.",
    )
    parser.add_argument("--suite", choices=tuple(SUITES), default="benchmark",
                        help="benchmark: the paper's 20 datasets (reports shipped models); dev: "
                        "the development suite of 40 real tables (every decision is made on "
                        "it; --data-dir defaults to $PUICL_DEVSUITE_DIR, else shared/devsuite)")
    parser.add_argument("--methods", default=",".join(m for m in METHOD_NAMES if m != "puicl"),
                        help=f"comma-separated list or 'all' of: {', '.join(METHOD_NAMES)} "
                        "(default: every baseline)")
    parser.add_argument("--datasets", default="all",
                        help="comma-separated list or 'all' of the suite's tables (benchmark: "
                        f"{', '.join(DATASET_SLUGS)}; dev: the slugs of its manifest.csv)")
    parser.add_argument("--repeats", type=int, default=10, help="repetitions per dataset")
    parser.add_argument("--out", type=Path, required=True, help="output folder (and its cache)")
    parser.add_argument("--weights", type=Path, default=None,
                        help="PUICL weights (.safetensors file or weights directory); default: the "
                        "model bundled with puicl_model")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="folder of the raw datasets (default: $PUICL_DATA_DIR, else the "
                        "project's shared/datasets next to the repository)")
    parser.add_argument("--pi", default=None,
                        help="target negative share of each task's unlabeled pool, in [0, 1), or "
                        "a comma-separated list of them; a dataset with too few negatives gives "
                        "a lower realized share, which is recorded. Several values: one report "
                        "folder per value (OUT/pi_0.2, ...) and the suite's figure over all of "
                        f"them in OUT/summary.md. Default: {TARGET_PI} (paper §6.1) for the "
                        f"benchmark, {','.join(f'{p:g}' for p in DEV_PIS)} for the dev suite")
    parser.add_argument("--max-positives", default=str(MAX_POSITIVES), metavar="N",
                        help=f"the most positives each task draws, a third of them labeled "
                        f"(default {MAX_POSITIVES}, paper §6.1), or 'all' for every positive of "
                        "the table: larger tasks from the same draws (docs/benchmark.md, "
                        "\"Tasks of every size\")")
    parser.add_argument("--label-frequency", default=None, metavar="C",
                        help="label a share C in (0, 1) of each task's drawn positives and put "
                        "every other row of the table in the pool (its own negative share; "
                        "--pi is then not used). Default: none, a third labeled at --pi "
                        "(paper §6.1)")
    parser.add_argument("--labeling", default=SCAR,
                        help="which drawn positives are labeled: scar (default, the paper's "
                        "uniform draw) or a biased mechanism, " + ", ".join(LABELINGS[1:])
                        + ": drawn with probabilities ∝ a propensity of their features "
                        "(docs/benchmark.md, \"Biased labeling\")")
    parser.add_argument("--seed", type=int, default=0, help="root seed of tasks and methods")
    parser.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    parser.add_argument("--method-config", type=Path, default=None,
                        help="YAML mapping method name -> settings overriding its defaults")
    parser.add_argument("--import-results", type=Path, default=None, metavar="CSV",
                        help="seed the cache from a published results.csv: the baselines' "
                        "rows (default settings) whose task sha256 and seed match, after "
                        "recomputing --verify-imports of them per method")
    parser.add_argument("--verify-imports", type=int, default=1, metavar="K",
                        help="imported replicates per method to recompute and compare first "
                        "(AUC within 0.002; default 1)")
    parser.add_argument("--report-only", action="store_true",
                        help="write the reports from the cache; fail if replicates are missing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def parse_pis(value: str | None, suite: str) -> tuple[float, ...]:
    """The --pi values: distinct, in [0, 1), in the order given."""
    if value is None:
        return DEV_PIS if suite == "dev" else (TARGET_PI,)
    pis: list[float] = []
    for part in value.split(","):
        try:
            pi = float(part)
        except ValueError:
            raise ValueError(f"--pi: {part.strip()!r} is not a number") from None
        if not 0.0 <= pi < 1.0:
            raise ValueError(f"--pi must be in [0, 1), got {part.strip()}")
        if pi in pis:
            raise ValueError(f"--pi: {part.strip()} is given twice")
        pis.append(pi)
    return tuple(pis)


def run_options(args: argparse.Namespace) -> dict[str, dict]:
    """Check the options every benchmark command shares (``--repeats``, ``--out``, ``--jobs``)
    and return the ``--method-config`` overrides (method name -> settings)."""
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out} is a file; give a folder")
    check_output_path(args.out, "directory", "--out")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    overrides: dict = {}
    if args.method_config is not None:
        overrides = load_yaml(args.method_config)
        for name, section in overrides.items():
            if name not in METHOD_NAMES:
                raise ConfigError(name, f"unknown method (known: {', '.join(METHOD_NAMES)})")
            if not isinstance(section, dict):
                raise ConfigError(name, "expected a mapping of settings")
    return overrides


def _specs_from_args(args: argparse.Namespace) -> list[RunSpec]:
    """One run spec per --pi value; several values write into OUT/pi_<value>/."""
    suite = get_suite(args.suite)
    methods = expand_names(args.methods, METHOD_NAMES, "method")
    datasets = expand_names(args.datasets, suite.slugs(args.data_dir), "dataset")
    pis = parse_pis(args.pi, args.suite)
    if args.label_frequency is not None:
        if args.pi is not None:
            raise ValueError("--pi and --label-frequency exclude each other: with a label "
                             "frequency the pool holds every other row, at the table's own π")
        pis = (TARGET_PI,)
    labeling = parse_labeling(args.labeling)
    max_positives = parse_max_positives(args.max_positives)
    label_frequency = (None if args.label_frequency is None
                       else parse_label_frequency(args.label_frequency))
    overrides = run_options(args)
    if args.import_results is not None and not args.import_results.is_file():
        raise ValueError(f"--import-results: no file at {args.import_results}")
    if args.verify_imports < 0:
        raise ValueError(f"--verify-imports must be >= 0, got {args.verify_imports}")
    return [RunSpec(methods=methods, datasets=datasets, repeats=args.repeats,
                    out=args.out / f"pi_{pi:g}" if len(pis) > 1 else args.out,
                    seed=args.seed, data_dir=args.data_dir, weights=args.weights,
                    jobs=args.jobs, method_overrides=overrides, target_pi=pi,
                    import_results=args.import_results, verify_imports=args.verify_imports,
                    suite=args.suite, labeling=labeling, max_positives=max_positives,
                    label_frequency=label_frequency)
            for pi in pis]


def _report_import(summary: ImportSummary, source: Path) -> None:
    for method, dataset, rep, published, now in summary.verified:
        print(f"[puicl-bench] import check: {method} on {dataset} repetition {rep}: AUC "
              f"{published:.6f} in {source}, {now:.6f} now", file=sys.stderr)
    reasons = [f"{method} (its rows depend on weights the CSV does not name)"
               if method == "puicl" else f"{method} (its settings are overridden)"
               for method in summary.skipped_methods]
    skipped = f"; computed, not imported: {', '.join(reasons)}" if reasons else ""
    print(f"[puicl-bench] imported {summary.imported} replicates from {source}{skipped}",
          file=sys.stderr, flush=True)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def exit_status(prog: str, work: Callable[[], int]) -> int:
    """Run a benchmark command's ``work``; what goes wrong as one line on stderr: a bad input
    or setting, or an output the file system refuses, with status 2; an interrupt (the cache
    keeps every finished replicate) with 130."""
    try:
        return work()
    # ValueError includes a refused import (benchmark.imports.ImportMismatchError)
    except (DataError, MissingWeightsError, MissingLibraryError, ConfigError, ValueError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a read-only place, a full disk
        print(f"{prog}: error: cannot write the results: {os_error_message(err)}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; finished replicates are cached, rerun the same "
              "command to resume", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    # SIGTERM (e.g. `kill`, a job scheduler) takes the same path as Ctrl-C: the worker
    # processes are stopped and the cache keeps every finished replicate.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    return exit_status("puicl-bench", lambda: _bench(args, argv))


def _bench(args: argparse.Namespace, argv: list[str]) -> int:
    specs = _specs_from_args(args)
    paths: dict[str, object] = {}
    frames = {}
    for spec in specs:
        records = _records(spec, args)
        if records is None:
            return 2
        paths.update(write_reports(spec, records, argv))
        frames[spec.target_pi] = records_frame(records, spec.datasets, spec.methods)
    if len(specs) > 1 or args.suite == "dev":
        suite = get_suite(args.suite)
        labeling = specs[0].labeling
        biased = "" if labeling == SCAR else f", labeling {labeling}"
        paths.update(write_summary(args.out, frames, specs[0].methods,
                                   f"{suite.description} ({args.suite}){biased}"))
    print(f"puicl-bench: wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _records(spec: RunSpec, args: argparse.Namespace) -> list[dict] | None:
    """Every replicate of one run: computed, taken from the cache, or imported first; None
    (after a message) when --report-only finds replicates missing."""
    if spec.import_results is not None and not args.report_only:
        _report_import(import_published(spec), spec.import_results)
    if not args.report_only:
        return run(spec, progress=False if args.no_progress else None)
    plan = plan_run(spec)
    if plan.todo:
        print(f"puicl-bench: {len(plan.todo)} replicates are not in {spec.out}/cache; "
              "run without --report-only first", file=sys.stderr)
        return None
    return plan.cached


if __name__ == "__main__":
    sys.exit(main())
