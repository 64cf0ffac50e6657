"""The ``trainer`` command: ``trainer export RUN --out DIR``, ``trainer interpolate A B --weight T
--out DIR`` and ``trainer plot RUN``.

Training itself is ``torchrun ... trainer/main.py`` (or ``python trainer/main.py``); the same
options are available as ``trainer train ...`` for a single process.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer", description="Work with PUICL training runs (see docs/training.md)."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    export = commands.add_parser(
        "export",
        help="write a run's EMA weights for PUICLClassifier(weights=DIR)",
    )
    export.add_argument("run", type=Path, help="run directory (--run-dir of the training)")
    export.add_argument("--out", type=Path, required=True, help="output weights directory")
    export.add_argument(
        "--step",
        type=int,
        default=None,
        help="checkpoint step (default: the newest; an error if it is damaged)",
    )

    interpolate = commands.add_parser(
        "interpolate",
        help="write the weights (1 - T)*A + T*B of two exported models of one configuration "
        "(docs/training.md, 'Fine-tuning from weights')",
    )
    interpolate.add_argument("first", type=Path, help="exported weights A (weight 0)")
    interpolate.add_argument("second", type=Path, help="exported weights B (weight 1)")
    interpolate.add_argument("--weight", type=float, required=True, help="T in [0, 1]")
    interpolate.add_argument("--out", type=Path, required=True, help="output weights directory")

    plot = commands.add_parser("plot", help="draw the curves of metrics.jsonl to a PNG")
    plot.add_argument("run", type=Path, help="run directory")
    plot.add_argument("--out", type=Path, default=None, help="PNG path (default RUN/metrics.png)")

    commands.add_parser(
        "train",
        help="train in this process (same options as trainer/main.py)",
        add_help=False,
    )
    return parser


def _weights_files(path: Path) -> list[Path]:
    """The files ``save_weights`` writes for ``path``, and ``load_weights`` reads: one
    ``.safetensors`` file, else a directory's weights and config (with a file's config.json
    beside it, which ``load_weights`` reads too)."""
    if path.suffix == ".safetensors" and not path.is_dir():
        return [path, path.parent / "config.json"]
    return [path / "model.safetensors", path / "config.json"]


def _check_out(args: argparse.Namespace) -> None:
    """Refuse an --out that cannot be written, or that is one of the command's inputs, before
    any checkpoint is read; refuse a run directory holding entries that are not regular files
    or folders before it is read."""
    from puicl_common.output_paths import check_output_path
    from puicl_common.run_files import check_run_directory
    from puicl_common.same_file import refuse_output_among_inputs

    if args.command in ("export", "interpolate"):
        # save_weights writes one file for a .safetensors name, else a directory
        kind = "file" if args.out.suffix == ".safetensors" else "directory"
        check_output_path(args.out, kind, "--out")
    elif args.command == "plot" and args.out is not None:
        check_output_path(args.out, "file", "--out")
    if args.command == "interpolate":
        written = _weights_files(args.out)[: 1 if args.out.suffix == ".safetensors" else 2]
        refuse_output_among_inputs(
            {f"--out ({path.name})": path for path in written},
            {f"{which} ({path.name})": path for which, model in (("A", args.first),
                                                                  ("B", args.second))
             for path in _weights_files(model)})
    if args.command in ("export", "plot"):
        check_run_directory(args.run, "the run directory")


def _one_line_warnings(command: str) -> None:
    """Show warnings (a skipped checkpoint, a rebuilt index) as one line each, not with the
    source line that raised them."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"trainer {command}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        from trainer.main import main as train_main

        return train_main(argv[1:])
    args = build_parser().parse_args(argv)

    from puicl_common.output_paths import os_error_message, write_failed
    from trainer.checkpoint import CheckpointError

    previous_showwarning = warnings.showwarning
    _one_line_warnings(args.command)
    try:
        _check_out(args)
        if args.command == "export":
            from trainer.export import export_run

            used = export_run(args.run, args.out, args.step)
            print(f"wrote {used} to {args.out}")
        elif args.command == "interpolate":
            from puicl_model.net.weights import save_weights
            from trainer.interpolation import interpolate_weights

            model = interpolate_weights(args.first, args.second, args.weight)
            try:
                written = save_weights(model, args.out)
            except OSError as err:
                raise write_failed(args.out, err) from None
            print(f"wrote {written}")
        elif args.command == "plot":
            from trainer.plotting import plot_run

            print(f"wrote {plot_run(args.run, args.out)}")
    except (CheckpointError, ValueError) as err:
        print(f"trainer {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # missing input, or an --out the file system refuses
        print(f"trainer {args.command}: error: {os_error_message(err)}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = previous_showwarning
    return 0


if __name__ == "__main__":
    sys.exit(main())
