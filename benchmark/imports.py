"""Seeding a run's cache from a published ``results.csv`` (``puicl-bench --import-results``).

A full baseline run costs core-hours, and its cache (``OUT/cache``) stays on the machine that
computed it; what the repository keeps is ``results.csv``. Importing turns those rows back into
cache entries, so that a new PUICL column is tabled next to the published baselines without
recomputing them. The CSV does not say which code or settings produced a row, so a row is
imported only where that cannot have changed unnoticed:

* the replicate's task bytes (sha256) and method seed equal the CSV row's;
* the method is a baseline run with its defaults: PUICL's rows depend on weights the CSV does
  not name, and a ``--method-config`` override changes what a row means;
* before anything is written, ``verify`` imported replicates per method (the cheapest ones) are
  recomputed with today's code, and the import is refused if any AUC differs by more than
  ``AUC_TOLERANCE`` (float results differ in the last digits between CPU kinds).

Imported records carry ``imported_from``; ``provenance.json`` counts them per source.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from puicl_common.atomic import atomic_write_json

AUC_TOLERANCE = 0.002
_INTEGERS = ("repetition", "seed", "n_labeled", "n_u_pos", "n_u_neg", "n_features")
_FLOATS = ("pi_true", "pi_hat", "pi_abs_error", "auc", "accuracy", "f1", "fit_predict_s")


class ImportMismatchError(ValueError):
    """A recomputed replicate disagrees with the CSV row it would import."""


@dataclass(frozen=True)
class ImportSummary:
    imported: int  # cache entries written from the CSV
    verified: tuple[tuple[str, str, int, float, float], ...]  # (method, dataset, rep, csv, now)
    skipped_methods: tuple[str, ...]  # asked for, but never imported (PUICL, overridden)


def read_results(path: Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The CSV's rows by (dataset, repetition, method), typed as the runner's records."""
    rows = {}
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("dataset", "method", "task_sha256", *_INTEGERS, *_FLOATS)
                   if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path} is not a puicl-bench results.csv: it lacks the "
                             f"column(s) {', '.join(missing)}")
        for row in reader:
            record: dict[str, Any] = dict(row)
            for key in _INTEGERS:
                record[key] = int(row[key])
            for key in _FLOATS:
                record[key] = float(row[key]) if row[key] not in ("", "nan", "None") else None
            rows[(record["dataset"], record["repetition"], record["method"])] = record
    return rows


def importable_methods(methods, overrides: dict[str, Any]) -> tuple[str, ...]:
    return tuple(m for m in methods if m != "puicl" and not overrides.get(m))


def import_results(todo: list[tuple], source: Path, methods: tuple[str, ...], verify: int,
                   recompute) -> ImportSummary:
    """Write cache entries for the ``todo`` replicates (the runner's ``_job`` arguments) that
    ``source`` holds, after recomputing ``verify`` of them per method with ``recompute`` (the
    runner's ``_job``, which caches what it computes)."""
    rows = read_results(source)
    matches: dict[str, list[tuple[tuple, dict[str, Any]]]] = {}
    for args in todo:
        task, method, seed, _weights, _overrides, _path, _key = args
        row = rows.get((task.dataset, task.repetition, method))
        if method in methods and row is not None and row["seed"] == seed \
                and row["task_sha256"] == task.fingerprint():
            matches.setdefault(method, []).append((args, row))
    verified = []
    for method, pairs in sorted(matches.items()):
        cheapest = sorted(pairs, key=lambda pair: (pair[0][0].X.size, pair[0][0].dataset,
                                                   pair[0][0].repetition))[:verify]
        for args, row in cheapest:
            now = recompute(*args)["auc"]
            verified.append((method, row["dataset"], row["repetition"], row["auc"], now))
            if abs(now - row["auc"]) > AUC_TOLERANCE:
                raise ImportMismatchError(
                    f"{source}: {method} on {row['dataset']} repetition {row['repetition']} "
                    f"has AUC {row['auc']:.6f} there but {now:.6f} with today's code (tolerance "
                    f"{AUC_TOLERANCE}); nothing was imported; run without --import-results")
        recomputed = {id(args) for args, _row in cheapest}
        matches[method] = [pair for pair in pairs if id(pair[0]) not in recomputed]
    imported = 0
    for pairs in matches.values():
        for args, row in pairs:
            path, key = args[5], args[6]
            atomic_write_json(path, {"key": key, "record": {**row, "imported_from": str(source)}})
            imported += 1
    asked = {args[1] for args in todo}
    return ImportSummary(imported=imported, verified=tuple(verified),
                         skipped_methods=tuple(sorted(asked - set(methods))))
