"""``prior-gen``: generate shards of synthetic PU tasks, or inspect a shard directory.

    prior-gen --config configs/smoke.yaml --stages all --out shards/
    prior-gen --stages 1-100 --out shards/              # phase 1 of configs/paper.yaml
    prior-gen --stages tail --steps 0-999 --out shards/ # part of the tail
    prior-gen --split val --stages 1,50,100 --steps 0-3 --out shards/
    prior-gen inspect shards/ [--split val] [--plot stats.png] [--verify]

Exit status: 0 done, 1 failure (e.g. the directory holds other shards or is being written by
another prior-gen), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from prior_gen.config import GenerationConfig, load_generation_config
from prior_gen.curriculum import all_stages
from prior_gen.errors import ShardError
from prior_gen.seeding import SPLIT_CODES, TAIL, Stage
from prior_gen.storage import WriterLockedError
from puicl_common.configio import ConfigError

__all__ = ["main", "parse_stages", "parse_steps"]

DEFAULT_CONFIG = "configs/paper.yaml"


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
        lo_text, _, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if hi_text else lo
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
    lo_text, _, hi_text = spec.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if hi_text else lo
    except ValueError:
        raise ValueError(
            f"bad --steps {spec!r} (use A-B, 0-based and inclusive, e.g. 0-24)"
        ) from None
    if lo < 0 or lo > hi:
        raise ValueError(f"bad --steps {spec!r}: need 0 <= A <= B")
    return lo, hi


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


def _load_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> GenerationConfig:
    path = Path(args.config)
    if not path.exists():
        hint = " (the default)" if args.config == DEFAULT_CONFIG else ""
        parser.error(
            f"config file {args.config}{hint} not found; pass --config PATH, "
            "e.g. --config configs/smoke.yaml"
        )
    try:
        config = load_generation_config(path)
        if args.seed is not None:
            config = config.with_seed(args.seed)
        if args.format is not None:
            import dataclasses

            config = dataclasses.replace(
                config, shards=dataclasses.replace(config.shards, format=args.format)
            )
    except ConfigError as err:
        parser.error(f"{args.config}: {err}")
    return config


class _ProgressBar:
    """A tqdm bar over tasks on a terminal (stderr); nothing otherwise."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, total: int, done: int):
        if not sys.stderr.isatty():
            return None
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=done, unit="task")
        return self.bar.update

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _generate(argv: Sequence[str]) -> int:
    from prior_gen.runner import default_workers, run_generation

    parser = _generate_parser()
    args = parser.parse_args(argv)
    config = _load_config(parser, args)
    try:
        stages = parse_stages(args.stages, config, args.config)
        steps = parse_steps(args.steps) if args.steps else None
        if steps is not None:
            from prior_gen.curriculum import steps_in_stage

            for stage in stages:
                n = steps_in_stage(stage, config.curriculum)
                if steps[1] >= n:
                    parser.error(
                        f"--steps {args.steps}: stage {stage} of {args.config} has steps 0..{n - 1}"
                    )
    except ValueError as err:
        parser.error(str(err))
    workers = args.workers if args.workers is not None else default_workers()
    if workers < 1:
        parser.error(f"--workers must be >= 1, got {workers}")
    backend = "dask" if args.scheduler else args.backend
    command = shlex.join(["prior-gen", *argv])
    progress = _ProgressBar()
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
        )
    except (ShardError, WriterLockedError, OSError) as err:
        print(f"prior-gen: error: {err}", file=sys.stderr)
        return 1
    finally:
        progress.close()
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
    from prior_gen.inspection import inspect_directory

    parser = _inspect_parser()
    args = parser.parse_args(argv)
    try:
        return inspect_directory(Path(args.directory), args.split, args.plot, args.verify)
    except ShardError as err:
        print(f"prior-gen inspect: error: {err}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "inspect":
        return _inspect(argv[1:])
    if argv and argv[0] == "generate":  # explicit form of the default action
        argv = argv[1:]
    return _generate(argv)


if __name__ == "__main__":
    sys.exit(main())
