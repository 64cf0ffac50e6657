"""``python -m relay``: start a relayed run, train one segment of it, take back what a segment
gave back, show the record, score the committed state.

    python -m relay init CONFIG FOLDER [--replay-steps K] [--set KEY=VALUE ...]
    python -m relay segment FOLDER OUT [--budget S] [--device auto|cpu|cuda] ...
    python -m relay take OUT/NAME FOLDER
    python -m relay show FOLDER
    python -m relay score FOLDER [--write]

Exit status: 0 done (or the run is complete: nothing to train); 2 a folder, state, config,
shard or trainer problem, in one line (nothing is written to OUT but the log); 3 the replay
of the previous segment differs and no change of machine explains it (the record's line,
with the verdict, is written to OUT and the run does not go on).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml


def _positive(kind: type):
    def parse(text: str):
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    return parse


def _segment_parser(commands: Any) -> None:
    segment = commands.add_parser("segment", help="train one segment of a run folder")
    segment.add_argument("folder", type=Path, help="the committed run folder")
    segment.add_argument("out", type=Path, help="where the new folder and its record go")
    segment.add_argument("--budget", type=_positive(float), default=520.0, metavar="SECONDS",
                         help="the whole segment's time, from the start (default %(default)s: "
                         "under 9 minutes; 0: no limit)")
    segment.add_argument("--device", default="auto", help="auto (a GPU if any), cpu or cuda")
    segment.add_argument("--until-step", type=int, default=None,
                         help="end the segment at this step at the latest")
    segment.add_argument("--work", type=Path, default=Path("/tmp/puicl_relay"),
                         help="shards, the run directory and the scores' files "
                         "(default %(default)s)")
    segment.add_argument("--threads", type=int, default=None,
                         help="torch threads (default: 1 on a CPU, which decides its bits; "
                         "torch's on a GPU)")
    segment.add_argument("--workers", type=int, default=None,
                         help="prior-gen processes (default: the cores less two)")
    segment.add_argument("--replay-steps", type=int, default=None,
                         help="steps after the committed one (default: relay.yaml's)")
    segment.add_argument("--first-chunk-steps", type=int, default=200,
                         help="new steps of the first chunk, before any speed is measured")
    segment.add_argument("--chunk-seconds", type=float, default=90.0,
                         help="a chunk's length at the measured speed (default %(default)s)")
    segment.add_argument("--score-seconds", type=_positive(float), default=20.0,
                         help="time kept at the end for the scores of the state the segment "
                         "started from to finish (they run beside the training; default "
                         "%(default)s)")
    segment.add_argument("--dev-repeats", type=_positive(int), default=2,
                         help="the development suite's repetitions (0: not scored)")
    segment.add_argument("--dev-jobs", type=int, default=None,
                         help="its worker processes (default: the cores less four)")
    segment.add_argument("--dev-datasets", default=None,
                         help="score these tables of the suite only (comma-separated; the "
                         "figure is then not the suite's)")
    segment.add_argument("--val-config", type=Path, default=None,
                         help="the config whose validation stages (step 0) are the fixed "
                         "validation split (default: configs/paper.yaml, the recipe study's)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m relay", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="start a run folder for a config")
    init.add_argument("config", type=Path)
    init.add_argument("folder", type=Path)
    init.add_argument("--replay-steps", type=int, default=100,
                      help="steps each segment trains after the state it commits, which the "
                      "next segment replays (default %(default)s)")
    init.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a dotted config key and its YAML value, e.g. "
                      "training.micro_batch_cells=null (repeatable)")
    _segment_parser(commands)
    take = commands.add_parser("take", help="check a segment's returned folder and put it "
                               "into the run folder")
    take.add_argument("returned", type=Path)
    take.add_argument("folder", type=Path)
    show = commands.add_parser("show", help="the record, one line a segment")
    show.add_argument("folder", type=Path)
    score = commands.add_parser("score", help="score the newest committed state's EMA "
                                "weights (the run's last, which no segment starts from)")
    score.add_argument("folder", type=Path)
    score.add_argument("--work", type=Path, default=Path("/tmp/puicl_relay_score"))
    score.add_argument("--dev-repeats", type=int, default=2)
    score.add_argument("--val-config", type=Path, default=None,
                       help="as for segment (default: configs/paper.yaml)")
    score.add_argument("--write", action="store_true",
                       help="add them to the folder's scores.jsonl (unless scored already)")
    return parser


def _overrides(pairs: list[str]) -> dict[str, Any]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {pair!r}: expected KEY=VALUE")
        found[key] = yaml.safe_load(value)
    return found


def _segment(args: argparse.Namespace) -> int:
    from relay.segment import SegmentOptions, run_segment

    line = run_segment(SegmentOptions(
        folder=args.folder, out=args.out, work=args.work, device=args.device,
        budget_s=args.budget, until_step=args.until_step, threads=args.threads,
        workers=args.workers, replay_steps=args.replay_steps,
        first_chunk_steps=args.first_chunk_steps, chunk_seconds=args.chunk_seconds,
        score_seconds=args.score_seconds, dev_repeats=args.dev_repeats,
        dev_jobs=args.dev_jobs, dev_datasets=args.dev_datasets,
        **({"val_config": args.val_config} if args.val_config else {})))
    from relay.report import line_summary

    print(f"relay: segment {line['segment']} done: {line_summary(line)}")
    print(f"relay: take it with: python -m relay take {args.out / args.folder.name} "
          f"{args.folder}")
    return 0


def run(args: argparse.Namespace) -> int:
    from relay import folder as run_folder

    if args.command == "init":
        settings = run_folder.init_folder(args.config, args.folder, args.replay_steps,
                                          _overrides(args.set))
        print(f"relay: {args.folder} starts the run of {args.config} "
              f"({settings['total_steps']} steps, {settings['replay_steps']} replayed a "
              "segment); train its first segment with: python -m relay segment "
              f"{args.folder} OUT")
        return 0
    if args.command == "segment":
        return _segment(args)
    if args.command == "take":
        line = run_folder.take(args.returned, args.folder)
        from relay.report import line_summary

        print(f"relay: {args.folder} takes segment {line['segment']}: {line_summary(line)}")
        return 0
    from relay import report

    if args.command == "show":
        print(report.table(args.folder))
        return 0
    from relay.scoring import PAPER_CONFIG

    scores = report.score_committed(args.folder, args.work, args.dev_repeats, args.write,
                                    args.val_config or PAPER_CONFIG)
    print(json.dumps(scores))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from prior_gen.shards.errors import ShardError
    from puicl_common.configio import ConfigError
    from relay.folder import FolderError
    from relay.segment import ReplayDiffers, RunComplete
    from relay.shards import GenerationError
    from relay.state_pack import StatePackError
    from relay.training import TrainerFailed
    from trainer.checkpoint import CheckpointError

    try:
        return run(args)
    except RunComplete as err:
        print(f"relay: {err}")
        return 0
    except ReplayDiffers as err:
        print(f"relay: stopped: {err}", file=sys.stderr)
        return 3
    except (FolderError, StatePackError, ConfigError, CheckpointError, ShardError,
            GenerationError, TrainerFailed, ValueError) as err:
        print(f"relay: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
