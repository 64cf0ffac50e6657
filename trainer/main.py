"""Train PUICL on stored shards: ``torchrun --nproc_per_node N trainer/main.py ...``.

Also runs as a single process: ``python trainer/main.py --config configs/smoke.yaml
--shards shards/smoke --run-dir runs/smoke``. With no arguments it trains the paper's run,
``configs/paper.yaml`` on ``shards/`` (prior-gen's default output) into ``runs/paper``. See
docs/training.md for the whole workflow.
"""

from __future__ import annotations

import time

# --time-limit counts from here: the imports and checks before the first step take time too
STARTED_AT = time.monotonic()

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# with no arguments, the paper's run on prior-gen's default output (README, docs/training.md)
DEFAULT_CONFIG = "configs/paper.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer/main.py",
        description="Train the PUICL model on shards written by prior-gen (paper §5). "
        "Run with torchrun for several processes; gloo on CPU, NCCL on GPUs.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=Path(DEFAULT_CONFIG),
        help="run config (YAML; default: %(default)s, the paper's run)",
    )
    parser.add_argument(
        "--shards",
        type=Path,
        default=Path("shards"),
        help="train split directory (default: shards/, prior-gen's default output)",
    )
    parser.add_argument(
        "--val-shards",
        type=Path,
        default=None,
        help="directory of the validation split (default: the --shards directory)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="checkpoints, metrics.jsonl and config.yaml go here; an existing run resumes "
        "(default: runs/<config file name without .yaml>, e.g. runs/paper)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="resume from this checkpoint file instead of the run directory's newest",
    )
    parser.add_argument(
        "--max-steps", type=int, default=None, help="train at most this many steps now"
    )
    parser.add_argument(
        "--until-step",
        type=int,
        default=None,
        help="stop once the run has completed this many steps (with --max-steps: the earlier)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="MINUTES",
        help="end this segment with a checkpoint (exit 0) before MINUTES have passed since "
        "the start, e.g. a batch job's walltime; the next segment continues the run",
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads per process (default: torch's)"
    )
    parser.add_argument(
        "--dist-backend",
        choices=("gloo", "nccl"),
        default=None,
        help="the process group's backend (default: nccl on GPUs, gloo on CPU); gloo lets "
        "several processes share one GPU",
    )
    return parser


def _input_problem(args: argparse.Namespace, run_dir: Path) -> str | None:
    """One line on a --config or --run-dir that cannot work, before anything is loaded."""
    from puicl_common.output_paths import OutputPathError, check_output_path
    from puicl_common.run_files import UnsafeEntryError, check_run_directory

    if not args.config.is_file():
        default = " (the default)" if str(args.config) == DEFAULT_CONFIG else ""
        state = "is not a file" if args.config.exists() else "not found"
        return (
            f"config {args.config}{default} {state}: run from the repository root or pass "
            "--config PATH, e.g. --config configs/smoke.yaml"
        )
    try:
        check_output_path(run_dir, "directory", "--run-dir")
        check_run_directory(run_dir, "--run-dir")
    except (OutputPathError, UnsafeEntryError) as err:
        return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    from puicl_common.runtime import MAX_THREADS

    args = build_parser().parse_args(argv)
    for name in ("max_steps", "until_step", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            build_parser().error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.threads is not None and args.threads > MAX_THREADS:  # (puicl_common.runtime's why)
        build_parser().error(f"--threads must be at most {MAX_THREADS}, got {args.threads}")
    if args.time_limit is not None and not args.time_limit > 0:
        build_parser().error(f"--time-limit must be positive minutes, got {args.time_limit}")

    run_dir = args.run_dir if args.run_dir is not None else Path("runs") / args.config.stem
    problem = _input_problem(args, run_dir)
    if problem is not None:
        print(f"trainer/main.py: error: {problem}", file=sys.stderr, flush=True)
        return 2

    from trainer.train import TrainArgs, train

    return train(
        TrainArgs(
            config=args.config,
            shards=args.shards,
            run_dir=run_dir,
            val_shards=args.val_shards,
            resume=args.resume,
            max_steps=args.max_steps,
            until_step=args.until_step,
            device=args.device,
            threads=args.threads,
            dist_backend=args.dist_backend,
            time_limit_s=None if args.time_limit is None else args.time_limit * 60.0,
            started_at=STARTED_AT,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
