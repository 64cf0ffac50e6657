"""Runs (dataset × repetition × method) replicates in parallel, with a per-replicate cache.

Every finished replicate is written at once to ``OUT/cache/<dataset>/<method>/rep<NN>.json``
(temp file + ``os.replace``, so a killed run never leaves a half-written result under a final
name). A rerun of the same command loads every cached replicate whose key still matches —
same task bytes (sha256), same method settings, same seed — and computes only the rest, so an
interrupted run resumes where it stopped. A cache file that does not parse or whose key
differs is recomputed and overwritten, never trusted.

Parallelism: joblib processes (``--jobs``), one replicate per call, one torch thread each.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.imports import ImportSummary, import_results, importable_methods
from benchmark.labeling import SCAR
from benchmark.methods import make_method, method_settings
from benchmark.metrics import accuracy, auc_mann_whitney, f1_positive
from benchmark.protocol import MAX_POSITIVES, TARGET_PI, PUTask, make_task, method_seed
from benchmark.suites import get_suite
from puicl_common.atomic import atomic_write_json

CACHE_VERSION = 1


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides the results of a benchmark run."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    repeats: int
    out: Path
    seed: int = 0
    data_dir: Path | None = None
    weights: Path | None = None
    jobs: int = 1
    method_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    # target negative share of the unlabeled pool (paper §6.1: 0.5); changes the tasks, so
    # their fingerprints (part of every cache key) differ per value
    target_pi: float = TARGET_PI
    # a published results.csv to seed the cache from (benchmark/imports.py), and how many of
    # its replicates per method to recompute first
    import_results: Path | None = None
    verify_imports: int = 1
    # which tables (benchmark/suites.py): the paper's 20 datasets, or the development suite
    suite: str = "benchmark"
    # which positives are labeled (benchmark/labeling.py): scar, the paper's uniform draw, or
    # a biased mechanism; changes the tasks, so their fingerprints differ per value
    labeling: str = SCAR
    # the most positives a task draws (paper §6.1: 600, a third of them labeled); larger caps
    # make larger tasks from the same draws (docs/benchmark.md, "Tasks of every size")
    max_positives: int = MAX_POSITIVES
    # the share of a task's drawn positives that is labeled, every other row in the pool
    # (benchmark.protocol.composition); None: the paper's third, at target_pi
    label_frequency: float | None = None


def _settings_hash(settings: dict[str, Any]) -> str:
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cache_path(out: Path, dataset: str, method: str, repetition: int) -> Path:
    return out / "cache" / dataset / method / f"rep{repetition:02d}.json"


def _cache_key(task: PUTask, method: str, seed: int, settings_hash: str) -> dict[str, Any]:
    return {
        "version": CACHE_VERSION,
        "dataset": task.dataset,
        "repetition": task.repetition,
        "method": method,
        "seed": seed,
        "settings": settings_hash,
        "task_sha256": task.fingerprint(),
    }


def load_cached(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached record at ``path`` if it parses and its key equals ``key``, else None."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or payload.get("key") != key:
        return None
    record = payload.get("record")
    return record if isinstance(record, dict) else None


def evaluate_replicate(
    task: PUTask,
    method_name: str,
    seed: int,
    weights: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit one method on one task and score its unlabeled predictions."""
    method = make_method(method_name, weights=weights, overrides=overrides)
    start = time.perf_counter()
    if getattr(method, "uses_categorical", False):
        # PUICL encodes categorical columns itself (one-hot); the baselines see the ordinal
        # codes as numbers, as in the paper's setup.
        output = method.fit_predict(task.X, task.s, seed, categorical=task.categorical)
    else:
        output = method.fit_predict(task.X, task.s, seed)
    elapsed = time.perf_counter() - start
    y_u = task.y_unlabeled
    scores = np.asarray(output.scores, dtype=np.float64)
    labels = np.asarray(output.labels).astype(np.int8)
    if scores.shape != y_u.shape or labels.shape != y_u.shape:
        raise RuntimeError(
            f"{method_name} returned {scores.shape} scores and {labels.shape} labels for "
            f"{y_u.shape[0]} unlabeled rows"
        )
    pi_hat = None if output.pi_hat is None else float(output.pi_hat)
    return {
        "dataset": task.dataset,
        "repetition": task.repetition,
        "method": method_name,
        "seed": seed,
        "n_labeled": task.n_labeled,
        "n_u_pos": task.n_u_pos,
        "n_u_neg": task.n_u_neg,
        "pi_true": task.pi,
        "pi_hat": pi_hat,
        "pi_abs_error": None if pi_hat is None else abs(pi_hat - task.pi),
        "auc": auc_mann_whitney(y_u, scores),
        "accuracy": accuracy(y_u, labels),
        "f1": f1_positive(y_u, labels),
        "fit_predict_s": elapsed,
        "n_features": int(task.X.shape[1]),
        "task_sha256": task.fingerprint(),
    }


def _job(task: PUTask, method: str, seed: int, weights: Path | None,
         overrides: dict[str, Any] | None, path: Path, key: dict[str, Any]) -> dict[str, Any]:
    record = evaluate_replicate(task, method, seed, weights, overrides)
    atomic_write_json(path, {"key": key, "record": record})
    return record


@dataclass
class Plan:
    cached: list[dict[str, Any]]
    todo: list[tuple]  # arguments of _job


def plan_run(spec: RunSpec) -> Plan:
    """Build all tasks, load what the cache already holds, list what remains to compute."""
    settings = {}
    for name in spec.methods:
        method = make_method(name, weights=spec.weights,
                             overrides=spec.method_overrides.get(name))
        settings[name] = _settings_hash(method_settings(method))
    cached: list[dict[str, Any]] = []
    todo: list[tuple] = []
    suite = get_suite(spec.suite)
    for slug in spec.datasets:
        dataset = suite.load(slug, spec.data_dir)
        for rep in range(spec.repeats):
            task = make_task(dataset, rep, spec.seed, max_positives=spec.max_positives,
                             target_pi=spec.target_pi, labeling=spec.labeling,
                             label_frequency=spec.label_frequency)
            for name in spec.methods:
                seed = method_seed(spec.seed, slug, rep, name)
                key = _cache_key(task, name, seed, settings[name])
                path = cache_path(spec.out, slug, name, rep)
                record = load_cached(path, key)
                if record is not None:
                    cached.append(record)
                else:
                    todo.append((task, name, seed, spec.weights,
                                 spec.method_overrides.get(name), path, key))
    return Plan(cached=cached, todo=todo)


def import_published(spec: RunSpec) -> ImportSummary:
    """Seed the cache from ``spec.import_results`` (benchmark/imports.py)."""
    assert spec.import_results is not None
    return import_results(plan_run(spec).todo, spec.import_results,
                          importable_methods(spec.methods, spec.method_overrides),
                          spec.verify_imports, _job)


def run(spec: RunSpec, progress: bool | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Compute every missing replicate of ``spec``; return all records (cached + new)."""
    from joblib import Parallel, delayed

    plan = plan_run(spec)
    records = list(plan.cached)
    if progress is None:
        progress = sys.stderr.isatty()
    total = len(plan.todo)
    start = time.perf_counter()
    if total:
        # Repetition by repetition, so that an unfinished run still covers every dataset and
        # method; within one, slowest first so the pool does not end on a straggler.
        order = {"vpu": 0, "nnpu": 1, "tedn": 2, "pu-bagging": 3, "empu": 4, "puicl": 5}
        todo = sorted(plan.todo, key=lambda a: (a[0].repetition, order.get(a[1], 9),
                                                -len(a[0].X), a[0].dataset))
        results: Iterable[dict[str, Any]]
        if spec.jobs == 1:
            results = (_job(*args) for args in todo)
        else:
            results = Parallel(n_jobs=spec.jobs, return_as="generator_unordered")(
                delayed(_job)(*args) for args in todo
            )
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, desc="replicates", unit="fit")
        try:
            for done, record in enumerate(results, start=1):
                records.append(record)
                if on_record is not None:
                    on_record(record)
                if bar is not None:
                    bar.update(1)
                elif done % 25 == 0 or done == total:
                    elapsed = time.perf_counter() - start
                    print(f"[puicl-bench] {done}/{total} computed ({elapsed:.0f} s)",
                          file=sys.stderr, flush=True)
        except BaseException:
            # Ctrl-C / SIGTERM: stop the worker processes now instead of letting them finish
            # the queued fits. Finished replicates are already in the cache; a rerun resumes.
            if spec.jobs != 1:
                _kill_workers()
            raise
        finally:
            if bar is not None:
                bar.close()
    print(
        f"[puicl-bench] {len(records)} replicates: {len(plan.cached)} from cache, "
        f"{total} computed in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return records


def _kill_workers() -> None:
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=False, kill_workers=True)


def expand_names(value: str, known: Sequence[str], what: str) -> tuple[str, ...]:
    """Parse a comma-separated list (or "all") against the known names."""
    if value.strip() == "all":
        return tuple(known)
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"unknown {what} {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}"
        )
    return names
