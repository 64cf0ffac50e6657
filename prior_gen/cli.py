"""``prior-gen``: generate shards of synthetic PU tasks, or inspect a shard directory.

    prior-gen --config configs/smoke.yaml --stages all --out shards/
    prior-gen --stages 1-100 --out shards/              # phase 1 of configs/paper.yaml
    prior-gen --stages tail --steps 0-999 --out shards/ # part of the tail
    prior-gen --split val --stages 1,50,100 --steps 0-3 --out shards/
    prior-gen inspect shards/ [--split val] [--plot stats.png] [--verify]

Exit status: 0 done, 1 failure (e.g. the directory holds other shards or is being written by
another prior-gen), 2 bad arguments (a config without a curriculum, an --out or --plot that
cannot be written), 130 interrupted (Ctrl-C or SIGTERM; the shards finished so far are kept
and a rerun of the same command continues).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from prior_gen.config import GenerationConfig, generation_config_from_mapping
from prior_gen.paper.curriculum import all_stages, steps_in_stage
from prior_gen.paper.seeding import SPLIT_CODES, TAIL, Stage
from prior_gen.shards.errors import ShardError
from prior_gen.shards.storage import WriterLockedError
from puicl_common.configio import ConfigError, file_setting, load_yaml
from puicl_common.output_paths import OutputPathError, check_output_path, os_error_message
from puicl_common.run_files import UnsafeEntryError, check_run_directory

if TYPE_CHECKING:
    from prior_gen.runner import ShardJob

__all__ = ["main", "parse_stages", "parse_steps"]

DEFAULT_CONFIG = "configs/paper.yaml"
# the most a command writes without --force: about five times the paper's whole train split
# (106 GB estimated), so that a config whose sizes run away is refused before it fills a disk
MAX_ESTIMATED_BYTES = 500 * 10**9


def _bounds(text: str) -> tuple[int, int]:
    """'A-B' or 'A' -> (A, B); a ValueError unless both are integers."""
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def parse_stages(spec: str, config: GenerationConfig, config_name: str) -> list[Stage]:
    """'1-100', '7', '1-3,9', 'tail', 'all', '1-3,tail' -> stages in curriculum order."""
    curriculum = config.curriculum
    chosen: set[Stage] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise ValueError(f"empty item in --stages {spec!r}")
        if part == "all":
            chosen.update(all_stages(curriculum))
            continue
        if part == TAIL:
            if curriculum.tail_steps == 0:
                raise ValueError(f"{config_name} has no tail (curriculum.tail_steps is 0)")
            chosen.add(TAIL)
            continue
        try:
            lo, hi = _bounds(part)
        except ValueError:
            raise ValueError(
                f"bad stage {part!r} in --stages (use e.g. 1-100, 7, 1-3,9, tail or all)"
            ) from None
        if lo > hi:
            raise ValueError(f"stage range {part!r} runs backwards")
        for stage in (lo, hi):
            if not 1 <= stage <= curriculum.stages:
                raise ValueError(
                    f"stage {stage} is outside 1..{curriculum.stages} of {config_name}"
                )
        chosen.update(range(lo, hi + 1))
    return [s for s in all_stages(curriculum) if s in chosen]


def parse_steps(spec: str) -> tuple[int, int]:
    """'A-B' or 'A' (0-based, inclusive)."""
    try:
        lo, hi = _bounds(spec)
    except ValueError:
        raise ValueError(
            f"bad --steps {spec!r} (use A-B, 0-based and inclusive, e.g. 0-24)"
        ) from None
    if lo < 0 or lo > hi:
        raise ValueError(f"bad --steps {spec!r}: need 0 <= A <= B")
    return lo, hi


def _size(n_bytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes:.0f} bytes"


def _generate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prior-gen",
        description="Generate synthetic PU tasks from the SCM prior (paper §2, §5) into shards. "
        "`prior-gen inspect DIR` shows what a shard directory holds.",
    )
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help="run config YAML (default: %(default)s)"
    )
    parser.add_argument(
        "--stages", default="all", help="e.g. 1-100, 7, 1-3,9, tail, all (= 1..K and the tail)"
    )
    parser.add_argument("--steps", help="A-B: only these steps (0-based, inclusive) of each stage")
    parser.add_argument("--split", choices=sorted(SPLIT_CODES), default="train")
    parser.add_argument("--out", default="shards", help="output directory (default: %(default)s/)")
    parser.add_argument("--format", choices=("zarr", "webdataset"), help="overrides shards.format")
    parser.add_argument(
        "--seed", type=int, help="overrides the config's seed (kept in the manifest)"
    )
    parser.add_argument("--workers", type=int, help="worker processes (default: all cores)")
    parser.add_argument("--backend", choices=("loky", "multiprocessing", "dask"), default="loky")
    parser.add_argument(
        "--scheduler", help="dask.distributed scheduler ADDRESS (implies --backend dask)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"generate even when the estimated size exceeds the free disk space or "
        f"{_size(MAX_ESTIMATED_BYTES)} (docs/training.md §1)",
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="trust shards already listed in the manifest without re-hashing them",
    )
    return parser


def _inspect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prior-gen inspect", description="Print the manifest and per-stage statistics."
    )
    parser.add_argument("directory", help="shard directory (holds manifest.json)")
    parser.add_argument("--split", choices=sorted(SPLIT_CODES), help="only this split")
    parser.add_argument("--plot", metavar="PNG", help="also save the statistics as a plot")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="re-hash every shard (without it, only presence and sizes are checked)",
    )
    return parser


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit status 2 (a bad argument that usage text would not explain)."""
    print(f"prior-gen: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _load_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> GenerationConfig:
    path = Path(args.config)
    if not path.exists():
        hint = " (the default)" if args.config == DEFAULT_CONFIG else ""
        parser.error(
            f"config file {args.config}{hint} not found; pass --config PATH, "
            "e.g. --config configs/smoke.yaml"
        )
    data = None
    try:
        data = load_yaml(path)
        if not data.get("curriculum"):
            # every curriculum key has the paper's default: an empty or prior-only config
            # would otherwise start the paper's 4.8 million tasks without a word
            _fail(
                f"{args.config} has no 'curriculum' section, which sets how much is "
                "generated (stages, steps_per_stage, tail_steps, global_batch): add one, "
                "e.g. as in configs/smoke.yaml"
            )
        config = generation_config_from_mapping(data, str(path))
        if args.seed is not None:
            config = config.with_seed(args.seed)
        if args.format is not None:
            config = replace(config, shards=replace(config.shards, format=args.format))
    except ConfigError as err:
        # a key set by a base file is named with that file (load_yaml's own errors name it)
        where = args.config if data is None else file_setting(path, err.key)
        parser.error(f"{where}: {err}")
    return config


def _announcer(
    config: GenerationConfig, args: argparse.Namespace
) -> Callable[[list[ShardJob], int], None]:
    """What ``run_generation`` will write, as one line on stderr before it writes anything."""
    from prior_gen.runner import estimated_bytes, estimated_memory
    from prior_gen.shards.reader import format_stages

    def announce(jobs: list[ShardJob], reused: int) -> None:
        if not jobs:
            return
        stages = format_stages(job.stage for job in jobs)
        steps = sum(j.n_steps for j in jobs)
        tasks = steps * config.curriculum.global_batch
        present = f"; {reused} already present" if reused else ""
        print(
            f"prior-gen: generating {len(jobs)} shard(s) of the {args.split} split of "
            f"{args.config} into {args.out} (stages {stages}: {steps} steps, {tasks} tasks), "
            f"an estimated {_size(estimated_bytes(config, jobs))}, its SCMs about "
            f"{_size(estimated_memory(config, jobs))} of memory per process{present}",
            file=sys.stderr,
            flush=True,
        )

    return announce


def _check_mechanisms(config: GenerationConfig) -> None:
    """What the config's mechanisms read (a corpus of real tables) checked once, before any
    shard is planned: one that cannot be used ends the command in one line, nothing written."""
    from prior_gen.mechanisms import MECHANISMS

    for mechanism in MECHANISMS:
        spec = mechanism.section(config.prior)
        if spec is not None and mechanism.check is not None:
            try:
                mechanism.check(spec)
            except ValueError as err:
                _fail(str(err))


def _physical_memory() -> int | None:
    """This machine's memory in bytes, where the system says."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _check_size(config: GenerationConfig, args: argparse.Namespace, stages: list[Stage],
                steps: tuple[int, int] | None, workers: int,
                worker_memory: int | None = None) -> None:
    """Refuse (one line, nothing written) a command whose shards would take more than the
    free disk space at --out or MAX_ESTIMATED_BYTES, or whose SCMs would hold more memory
    than this machine has (``workers`` processes at once) or, with --scheduler, than a dask
    worker gives one of its threads (``worker_memory``), unless --force."""
    import shutil

    from prior_gen.runner import estimated_bytes, estimated_memory, jobs_to_write

    if args.force:
        return
    out = Path(args.out)
    jobs = jobs_to_write(config, args.split, stages, out, steps)
    planned = estimated_bytes(config, jobs)
    existing = next(p for p in (out, *out.absolute().parents) if p.is_dir())
    limit, where = MAX_ESTIMATED_BYTES, "the most prior-gen writes without --force"
    if planned <= limit:
        limit, where = shutil.disk_usage(existing).free, f"the free space on {existing}'s disk"
    if planned > limit:
        _fail(f"{args.config} would write an estimated {_size(planned)} of shards into "
              f"{args.out}, more than {_size(limit)} ({where}): check the sizes in its prior "
              "and curriculum sections, or pass --force to generate anyway")
    # sizes within their bounds multiply (width x depth x batch x rows): a run past memory
    # would end in a MemoryError after its manifest and lock were written
    if args.scheduler:  # the SCMs run on the workers, a task per thread
        processes, available = 1, worker_memory
        where = "a dask worker's memory limit per thread"
    else:
        processes, available = min(workers, len(jobs)), _physical_memory()
        where = "this machine's memory"
    memory = estimated_memory(config, jobs) * processes
    if jobs and available is not None and memory > available:
        per = f" ({processes} processes)" if processes > 1 else ""
        _fail(f"{args.config}'s SCMs would hold an estimated {_size(memory)} of memory{per}, "
              f"more than {where} ({_size(available)}): lower prior.scm.width / depth, "
              "curriculum.global_batch or the dataset sizes, use fewer --workers, or pass "
              "--force to generate anyway")


def _generate(argv: Sequence[str]) -> int:
    from prior_gen.runner import default_workers, run_generation

    parser = _generate_parser()
    args = parser.parse_args(argv)
    config = _load_config(parser, args)
    _check_mechanisms(config)
    try:
        stages = parse_stages(args.stages, config, args.config)
        steps = parse_steps(args.steps) if args.steps else None
        for stage in stages if steps else ():
            n = steps_in_stage(stage, config.curriculum)
            if steps[1] >= n:
                parser.error(f"--steps {args.steps}: stage {stage} of {args.config} has steps "
                             f"0..{n - 1}")
    except ValueError as err:
        parser.error(str(err))
    workers = args.workers if args.workers is not None else default_workers()
    if workers < 1:
        parser.error(f"--workers must be >= 1, got {workers}")
    try:
        check_output_path(args.out, "directory", "--out")
        check_run_directory(args.out, "--out")
    except (OutputPathError, UnsafeEntryError) as err:
        _fail(str(err))
    backend = "dask" if args.scheduler else args.backend
    worker_memory = None
    if args.scheduler:
        from prior_gen.runner import check_scheduler

        try:
            worker_memory = check_scheduler(args.scheduler)
        except (ValueError, ImportError) as err:
            _fail(str(err))
    try:
        _check_size(config, args, stages, steps, workers, worker_memory)
    except ShardError as err:
        print(f"prior-gen: error: {err}", file=sys.stderr)
        return 1
    command = shlex.join(["prior-gen", *argv])
    bars = []  # a tqdm bar over tasks on a terminal (stderr), none otherwise

    def progress(total: int, done: int) -> Callable[[int], object] | None:
        if not sys.stderr.isatty():
            return None
        from tqdm import tqdm

        bars.append(tqdm(total=total, initial=done, unit="task"))
        return bars[-1].update

    try:
        summary = run_generation(
            config,
            args.split,
            stages,
            Path(args.out),
            steps=steps,
            workers=workers,
            backend=backend,
            scheduler=args.scheduler,
            verify=args.verify,
            config_path=args.config,
            command=command,
            progress=progress,
            on_plan=_announcer(config, args),
        )
    except (ShardError, WriterLockedError) as err:
        print(f"prior-gen: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"prior-gen: error: {os_error_message(err)}", file=sys.stderr)
        return 1
    except MemoryError:  # past the estimate's check only with --force
        print(f"prior-gen: error: out of memory generating {args.config}'s tasks; the shards "
              "finished are kept: lower the config's sizes or use fewer --workers",
              file=sys.stderr)
        return 1
    finally:
        for bar in bars:
            bar.close()
    rate = summary.tasks_written / summary.seconds if summary.seconds > 0 else 0.0
    regenerated = (
        f", {len(summary.regenerated)} damaged/missing regenerated" if summary.regenerated else ""
    )
    print(
        f"prior-gen: {args.split} split of {args.config} -> {args.out}: "
        f"{summary.written} shards written ({summary.tasks_written} tasks, "
        f"{summary.bytes_written / 1e6:.1f} MB), {summary.reused} already present{regenerated}; "
        f"{summary.seconds:.1f} s ({rate:.0f} tasks/s, {workers} worker(s), {backend})"
    )
    return 0


def _inspect(argv: Sequence[str]) -> int:
    from prior_gen.shards.inspection import inspect_directory

    parser = _inspect_parser()
    args = parser.parse_args(argv)
    directory = Path(args.directory)

    def error(message: str, status: int) -> int:
        print(f"prior-gen inspect: error: {message}", file=sys.stderr)
        return status

    if directory.exists() and not directory.is_dir():
        return error(f"{directory} is a file: give the shard directory (holds manifest.json)", 2)
    try:
        if args.plot:
            check_output_path(args.plot, "file", "--plot")
        check_run_directory(directory, "the shard directory")
        return inspect_directory(directory, args.split, args.plot, args.verify)
    except OutputPathError as err:  # also a --plot the file system refused
        return error(str(err), 2)
    except ShardError as err:
        return error(str(err), 1)
    except OSError as err:
        return error(os_error_message(err), 2)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    inspecting = bool(argv) and argv[0] == "inspect"
    previous = None
    # SIGTERM (kill, a job scheduler) takes the path of Ctrl-C: one line, status 130
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if inspecting:
            return _inspect(argv[1:])
        if argv and argv[0] == "generate":  # explicit form of the default action
            argv = argv[1:]
        return _generate(argv)
    except KeyboardInterrupt:
        resume = "" if inspecting else (
            "; finished shards are kept, and the same command continues from them"
        )
        print(f"prior-gen: interrupted{resume}", file=sys.stderr)
        # a shard write in flight on zarr's event loop is abandoned here (an unfinished shard
        # is never published, so nothing is lost); without this, asyncio logs the pending task
        # when the interpreter exits, a multi-line message after the one line above
        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
        # an interrupt between the creation of zarr's coroutines and their scheduling leaves
        # them unawaited, and Python warns of each as it is collected: more lines again
        warnings.filterwarnings("ignore", message="coroutine .* was never awaited",
                                category=RuntimeWarning)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
