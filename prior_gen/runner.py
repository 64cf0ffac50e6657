"""Plan and run a generation: which shards to write, by which workers, and the bookkeeping.

A worker generates a whole shard, renames it into place and returns its record; the process
that holds the writer lock adds the records to ``manifest.json``, and a rerun keeps the listed
shards whose sha256 still matches (docs/architecture.md §6, "Integrity and resume").
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prior_gen.config import GenerationConfig
from prior_gen.paper.curriculum import annealing_stage, steps_in_stage
from prior_gen.paper.seeding import Stage
from prior_gen.shards.faults import crash_if_planned, kill_after_from_env
from prior_gen.shards.manifest import (
    check_compatible,
    load_manifest,
    new_manifest,
    shard_key,
    shard_relpath,
    stage_key,
    task_stats,
    write_manifest,
)
from prior_gen.shards.storage import (
    WriterLock,
    digest_path,
    publish,
    remove_path,
    remove_temporaries,
    temp_path,
)
from puicl_common.run_files import check_inside

__all__ = [
    "BACKENDS",
    "SCHEDULER_TIMEOUT_S",
    "RunSummary",
    "ShardJob",
    "bytes_to_write",
    "check_scheduler",
    "estimated_bytes",
    "estimated_memory",
    "jobs_to_write",
    "plan_jobs",
    "run_generation",
    "write_shard",
]

BACKENDS = ("loky", "multiprocessing", "dask")
_FLUSH_SECONDS = 1.0


@dataclass(frozen=True)
class ShardJob:
    split: str
    stage: Stage
    first_step: int
    n_steps: int

    def relpath(self, fmt: str) -> str:
        return shard_relpath(self.split, self.stage, self.first_step, fmt)


@dataclass
class RunSummary:
    reused: int = 0  # already present and verified
    written: int = 0
    tasks_written: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    regenerated: list[str] = field(default_factory=list)  # listed but missing or damaged


def plan_jobs(
    config: GenerationConfig,
    split: str,
    stages: Iterable[Stage],
    steps: tuple[int, int] | None = None,
) -> list[ShardJob]:
    """Shards covering ``steps`` (inclusive, 0-based; all if None) of each stage, rounded out
    to whole shards so that every shard always holds the same steps."""
    per_shard = config.shards.steps_per_shard
    jobs = []
    for stage in stages:
        n_steps = steps_in_stage(stage, config.curriculum)
        lo, hi = (0, n_steps - 1) if steps is None else steps
        if not 0 <= lo <= hi < n_steps:
            raise ValueError(f"steps {lo}-{hi} are outside 0..{n_steps - 1} of stage {stage}")
        for first in range(lo - lo % per_shard, hi + 1, per_shard):
            jobs.append(ShardJob(split, stage, first, min(per_shard, n_steps - first)))
    return jobs


def estimated_bytes(config: GenerationConfig, jobs: Iterable[ShardJob]) -> int:
    """About how many bytes the shards of ``jobs`` hold: the tasks' expected float32 x and
    int8 y at each stage's ranges (rows = P·(1 + η), features d, means of their ranges).

    An announcement of scale, not a promise: compression takes some off, per-task metadata
    adds some (configs/paper.yaml: 106 GB estimated, ≈ 92 GB stored; configs/smoke.yaml's
    tiny tasks: 0.15 MB estimated, 0.17 MB stored).
    """
    curriculum = config.curriculum
    dataset = config.prior.dataset
    features = sum(dataset.n_features) / 2
    total = 0.0
    for job in jobs:
        stage = annealing_stage(job.stage, curriculum)
        labeled = sum(dataset.n_labeled_at(stage, curriculum.stages)) / 2
        eta = sum(curriculum.eta.at(stage, curriculum.stages)) / 2
        rows = labeled * (1.0 + eta)
        total += job.n_steps * curriculum.global_batch * rows * (4 * features + 1)
    return int(total)


# What one step's SCM pass (prior_gen.engine.forward) holds at its peak: per weight of its
# tasks' MLPs (the float32 weights, the random words they are drawn from and Box-Muller's
# scratch) and per generated row (hidden states of width h, causes, their words, the task
# built from them). Measured with tracemalloc on steps of widths 32-512, depths 4-16 and
# 100-2,000 labeled rows (11-12 bytes per weight, 9-12·h per row), rounded up.
PEAK_BYTES_PER_WEIGHT = 12


def _peak_bytes_per_row(width: int, causes: int) -> int:
    return 10 * width + 16 * causes + 64


def _expected_train_rows(labeled: float, pi: tuple[float, float]) -> float:
    """E[P / (1 − π)] for π uniform on ``pi``: the rows a task draws to keep P positives."""
    lo, hi = pi
    if hi - lo < 1e-9:
        return labeled / (1.0 - lo)
    return labeled * math.log((1.0 - lo) / (1.0 - hi)) / (hi - lo)


def estimated_memory(config: GenerationConfig, jobs: Iterable[ShardJob]) -> int:
    """About the most memory one process holds while it generates a step of ``jobs``: the SCMs
    of the step's ``global_batch`` tasks run together, so their weights (at the largest width,
    depth and causes the config allows: a stage may draw them for every task of a step) and
    their rows (expected at the stage's ranges) are held at once. Sizes within their bounds
    multiply: width 1,024 and depth 64 give each task 66 million weights."""
    scm, dataset, curriculum = config.prior.scm, config.prior.dataset, config.curriculum
    width, depth = scm.width[1], scm.depth[1]
    causes = max(scm.n_causes, dataset.n_features[1])  # "causes" mode uses k = d
    weights = causes * width + (depth - 1) * width * width
    peak = 0.0
    for stage in {annealing_stage(job.stage, curriculum) for job in jobs}:
        labeled = sum(dataset.n_labeled_at(stage, curriculum.stages)) / 2
        eta = sum(curriculum.eta.at(stage, curriculum.stages)) / 2
        rows = _expected_train_rows(labeled, curriculum.pi.at(stage, curriculum.stages)) \
            + labeled * eta
        step = curriculum.global_batch * (PEAK_BYTES_PER_WEIGHT * weights
                                          + rows * _peak_bytes_per_row(width, causes))
        peak = max(peak, step)
    return int(peak)


def jobs_to_write(config: GenerationConfig, split: str, stages: Iterable[Stage], out: Path,
                  steps: tuple[int, int] | None = None) -> list[ShardJob]:
    """The shards of this command that ``out``'s manifest does not list yet (read only:
    nothing is written, no lock is taken)."""
    manifest = load_manifest(out) if out.is_dir() else None
    records = (manifest or {}).get("splits", {}).get(split, {})
    return [job for job in plan_jobs(config, split, stages, steps)
            if shard_key(job.first_step) not in records.get(stage_key(job.stage), {})]


def bytes_to_write(config: GenerationConfig, split: str, stages: Iterable[Stage], out: Path,
                   steps: tuple[int, int] | None = None) -> int:
    """:func:`estimated_bytes` of the shards of :func:`jobs_to_write`."""
    return estimated_bytes(config, jobs_to_write(config, split, stages, out, steps))


SCHEDULER_TIMEOUT_S = 10  # how long prior-gen --scheduler waits for the scheduler's answer


def check_scheduler(address: str) -> int | None:
    """The scheduler check ``puicl predict`` runs (:mod:`puicl_common.dask_scheduler`), within
    :data:`SCHEDULER_TIMEOUT_S`: a ValueError (or, without dask, an ImportError) in one line
    where no healthy scheduler with a worker answers there; the command checks it before it
    writes anything. Returns the memory one task may hold on its workers (None: no limit)."""
    from puicl_common.dask_scheduler import check_scheduler as common_check
    from puicl_common.dask_scheduler import memory_per_thread

    return memory_per_thread(common_check(address, SCHEDULER_TIMEOUT_S))


def _write_shard_from(arguments: tuple[GenerationConfig, ShardJob, str]) -> dict[str, Any]:
    return write_shard(*arguments)


def write_shard(config: GenerationConfig, job: ShardJob, directory: str) -> dict[str, Any]:
    """Generate the steps of ``job``, write its shard atomically and return its record."""
    from threadpoolctl import threadpool_limits

    from prior_gen.generate import generate_step

    with threadpool_limits(1):  # single-threaded BLAS: the workers already use every core
        steps = [generate_step(config, job.split, job.stage, step)
                 for step in range(job.first_step, job.first_step + job.n_steps)]
    fmt = config.shards.format
    final = Path(directory) / job.relpath(fmt)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final)
    where = {"split": job.split, "stage": stage_key(job.stage), "first_step": job.first_step,
             "n_steps": job.n_steps}
    attributes = {**where, "global_batch": config.curriculum.global_batch,
                  "config_hash": config.hash()}
    try:
        if fmt == "zarr":
            from prior_gen.shards.zarr_format import write_zarr_shard

            extra = write_zarr_shard(tmp, steps, config.shards, attributes)
        else:
            from prior_gen.shards.tar_format import write_tar_shard

            extra = write_tar_shard(tmp, steps, config.shards, attributes)
        sha256, size = digest_path(tmp)
        # a link, FIFO or device planted at the shard's place (or a folder above it) while
        # this run writes is refused, not replaced (puicl_common.run_files)
        check_inside(final, directory)
        publish(tmp, final)
    except BaseException:
        # a failed cleanup must not replace what is being raised (an interrupt above all);
        # a temporary left behind is removed by the next run (storage.remove_temporaries)
        with contextlib.suppress(OSError):
            remove_path(tmp)
        raise
    tasks = [task for step in steps for task in step]
    return {"path": job.relpath(fmt), **where, "n_tasks": len(tasks), "sha256": sha256,
            "bytes": size, "stats": task_stats(tasks), **extra}


def _verified(directory: Path, record: dict[str, Any] | None, verify: bool) -> bool:
    """Whether the shard of ``record`` (None: not listed) is there, and (``verify``) intact."""
    if record is None or not (directory / record["path"]).exists():
        return False
    return not verify or digest_path(directory / record["path"])[0] == record["sha256"]


def _leave_signals_to_the_parent() -> None:
    """Loky workers ignore Ctrl-C (which a terminal sends to the whole process group) and
    SIGTERM: the main process decides, and stops them after their current shard."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _loky_records(
    config: GenerationConfig, jobs: list[ShardJob], directory: Path, workers: int
) -> Iterator[dict[str, Any]]:
    """Records of ``jobs`` from loky worker processes, as they finish.

    Used directly rather than through joblib, whose abort on an exception (Ctrl-C included)
    kills the workers mid-shard: a killed worker cannot release its semaphores (numcodecs'
    Blosc lock), and the resource tracker then warns about them at exit. Here an
    interruption cancels the queued shards and waits for the running ones (each a few
    seconds at most), so the workers end normally.
    """
    from joblib.externals.loky import get_reusable_executor

    executor = get_reusable_executor(
        max_workers=workers, initializer=_leave_signals_to_the_parent
    )
    queue = iter(jobs)
    pending: set[Future] = set()

    def submit(count: int) -> None:
        for job in itertools.islice(queue, count):
            pending.add(executor.submit(write_shard, config, job, str(directory)))

    try:
        submit(2 * workers)  # a few per worker in flight: all an interruption waits for
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                pending.discard(future)
                submit(1)
                yield future.result()
    except BaseException as err:
        for future in pending:
            future.cancel()
        executor.shutdown(wait=True)
        if isinstance(err, KeyboardInterrupt):
            # the shards that ran to the end are on disk: hand them over to the manifest
            for future in pending:
                if not future.cancelled() and future.exception() is None:
                    yield future.result()
        raise


def _execute(
    config: GenerationConfig,
    jobs: list[ShardJob],
    directory: Path,
    workers: int,
    backend: str,
    scheduler: str | None,
) -> Iterator[dict[str, Any]]:
    """Records of ``jobs`` as they finish (any order)."""
    if not jobs:
        return
    if backend != "dask" and (workers == 1 or len(jobs) == 1):
        for job in jobs:
            yield write_shard(config, job, str(directory))
        return
    if backend == "loky":
        yield from _loky_records(config, jobs, directory, workers)
        return
    if backend == "multiprocessing":
        # workers start from a fresh interpreter (forkserver, else spawn), never by forking
        # this process: a fork copies locks held by this process's other threads (torch,
        # BLAS, compressors), and a worker that inherits one held hangs for good (seen in the
        # test suite under load). The standard library's pool, since joblib's multiprocessing
        # backend (1.6) builds its pool from a fork context whatever context it is given.
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context(
            "forkserver" if "forkserver" in methods else "spawn"
        )
        arguments = [(config, job, str(directory)) for job in jobs]
        with context.Pool(processes=workers) as pool:
            yield from pool.imap_unordered(_write_shard_from, arguments)
        return
    from joblib import Parallel, delayed, parallel_config

    calls = (delayed(write_shard)(config, job, str(directory)) for job in jobs)
    try:
        from distributed import Client, LocalCluster
    except ImportError as err:
        raise RuntimeError(
            "the dask backend needs dask.distributed: pip install 'puicl[distributed]'"
        ) from err
    cluster = None if scheduler else LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(scheduler or cluster)
    try:
        with parallel_config(backend="dask"):
            yield from Parallel(n_jobs=-1, return_as="generator_unordered")(calls)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_generation(
    config: GenerationConfig,
    split: str,
    stages: list[Stage],
    out: Path,
    steps: tuple[int, int] | None = None,
    workers: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    verify: bool = True,
    config_path: str = "",
    command: str = "",
    progress: Callable[[int, int], Callable[[int], None]] | None = None,
    on_plan: Callable[[list[ShardJob], int], None] | None = None,
) -> RunSummary:
    """Generate the shards of ``stages`` (x ``steps``) of ``split`` into ``out``.

    ``progress(total_tasks, already_done)`` may return a callback that receives the number of
    tasks of each finished shard. ``on_plan(jobs_to_write, shards_reused)`` is called once
    the existing shards are checked, before any shard is written.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    started = time.perf_counter()
    summary = RunSummary()
    jobs = plan_jobs(config, split, stages, steps)
    out.mkdir(parents=True, exist_ok=True)
    with WriterLock(out):
        remove_temporaries(out)
        manifest = load_manifest(out)
        if manifest is None:
            manifest = new_manifest(config, config_path)
        else:
            check_compatible(manifest, config, out)
        if command:
            manifest["commands"] = [*manifest["commands"], command][-100:]
        records = manifest["splits"].setdefault(split, {})

        listed = [
            (job, records.get(stage_key(job.stage), {}).get(shard_key(job.first_step)))
            for job in jobs
        ]
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            checks = list(pool.map(lambda pair: _verified(out, pair[1], verify), listed))
        todo = []
        for (job, record), ok in zip(listed, checks, strict=True):
            if ok:
                summary.reused += 1
            else:
                if record is not None:
                    summary.regenerated.append(record["path"])
                    del records[stage_key(job.stage)][shard_key(job.first_step)]
                todo.append(job)

        if on_plan is not None:
            on_plan(todo, summary.reused)
        batch = config.curriculum.global_batch
        total_tasks = sum(job.n_steps for job in jobs) * batch
        done_tasks = total_tasks - sum(job.n_steps for job in todo) * batch
        advance = progress(total_tasks, done_tasks) if progress else None
        last_flush = time.monotonic()
        kill_after = kill_after_from_env()  # tests only: crash at an exact point
        try:
            for record in _execute(config, todo, out, workers, backend, scheduler):
                crash_if_planned(kill_after, summary.written + 1)
                records.setdefault(record["stage"], {})[shard_key(record["first_step"])] = record
                summary.written += 1
                summary.tasks_written += record["n_tasks"]
                summary.bytes_written += record["bytes"]
                if advance is not None:
                    advance(record["n_tasks"])
                if time.monotonic() - last_flush >= _FLUSH_SECONDS:
                    write_manifest(out, manifest)
                    last_flush = time.monotonic()
        finally:
            write_manifest(out, manifest)
    summary.seconds = time.perf_counter() - started
    return summary


def default_workers() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
