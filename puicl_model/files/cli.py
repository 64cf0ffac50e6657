"""``puicl``: command-line access to the PUICL classifier.

``puicl predict`` reads a PU table from CSV or Parquet files (by extension) in one of two
layouts

* one table with a 0/1 label column: ``--input table.csv --label-column s``
  (1 = labeled positive, 0 = unlabeled), or
* two tables with the same columns (matched by name, in any order):
  ``--positives pos.parquet --unlabeled unl.parquet``,

fits :class:`~puicl_model.estimator.classifier.PUICLClassifier` and writes one row per unlabeled row
(``row``: its 0-based position among the data rows of its input file; ``p_positive``;
``label``: 1 = positive, 0 = negative), reading and writing a batch of rows at a time
(:mod:`puicl_model.files.large_tables`; ``--scheduler``: on dask,
:mod:`puicl_model.files.dask_scoring`), then prints π̂, the estimated negative share of the
unlabeled rows, with what the data identify about it (``class_prior_report``: a lower bound,
π̂'s interval, a flag), also written as JSON with ``--prior-json PATH``; ``--report FILE.html``
draws them on a page (:mod:`puicl_model.estimator.report`). ``--save-model DIR`` saves the fitted
classifier (:mod:`puicl_model.estimator.saved_model`); ``--model DIR`` scores the rows of
``--input`` with a saved one instead of fitting. ``puicl info
[WEIGHTS]`` prints a checkpoint's config and parameter counts (without WEIGHTS: the bundled
model's)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from puicl_common.atomic import atomic_write_json
from puicl_model.files.cli_lines import portfolio_line, prior_lines, say_the_cut
from puicl_model.files.cli_paths import CliError, check_paths
from puicl_model.files.cli_settings import add_setting_options, refuse_unused_by_model

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.files.large_tables import FittedPool

__all__ = ["main"]


def _threshold(text: str) -> float | str:
    if text == "prior":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1) or 'prior', got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="puicl", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    predict = commands.add_parser(
        "predict",
        help="score the unlabeled rows of a PU table given as CSV or Parquet",
        description="Score the unlabeled rows of a PU table (CSV or Parquet files, by their "
        "extension: .parquet or .pq is Parquet, anything else CSV): writes row, p_positive, "
        "label per unlabeled row and prints the estimated negative share π̂.",
    )
    _add_predict_options(predict)

    info = commands.add_parser("info", help="print a checkpoint's model config",
                               description="Print a checkpoint's file, checksum, model config "
                               "and parameter counts.")
    info.add_argument("weights", type=Path, nargs="?", default=None,
                      help="checkpoint directory or .safetensors file (default: the bundled "
                      "model)")
    return parser


def _add_predict_options(predict: argparse.ArgumentParser) -> None:
    """``puicl predict``'s options. The inference defaults and their limits are written once,
    with the classifier; every option's help ends with its default."""
    from puicl_model.files.large_tables import DEFAULT_BATCH_ROWS

    layout = predict.add_argument_group("input (one of the two layouts)")
    layout.add_argument("--input", type=Path,
                        help="one CSV or Parquet table with a label column")
    layout.add_argument("--label-column", help="the 0/1 column of --input (1 = labeled positive)")
    layout.add_argument("--positives", type=Path, help="CSV or Parquet file of the labeled "
                        "positives")
    layout.add_argument("--unlabeled", type=Path, help="CSV or Parquet file of the unlabeled "
                        "rows")
    predict.add_argument("--output", "-o", default="-",
                         help="output CSV or Parquet file (by its extension); probabilities "
                         "are written in full precision (default: CSV on standard output)")
    predict.add_argument("--weights", type=Path, default=None,
                         help="checkpoint directory or .safetensors file (default: the bundled "
                         "model)")
    predict.add_argument("--device", default="auto",
                         help="auto, cpu, cuda, cuda:N (default: auto, a GPU where there is one)")
    add_setting_options(predict)
    predict.add_argument("--threshold", type=_threshold, default=None,
                         help="cut on p_positive, or 'prior' to label the share π̂ negative "
                         "(default: 0.5; with --model: the saved classifier's)")
    predict.add_argument("--drop-columns", nargs="*", default=[], metavar="NAME",
                         help="columns to ignore (default: none)")
    predict.add_argument("--keep-columns", nargs="*", default=[], metavar="NAME",
                         help="columns to keep as features although they look like "
                         "identifiers (whole numbers or text with a different value in nearly "
                         "every row, which are dropped with a note) (default: none)")
    predict.add_argument("--categorical", choices=("onehot", "ordinal", "frequency"),
                         default="onehot",
                         help="encoding of text/category columns (default: onehot)")
    predict.add_argument("--numeric", choices=("quantile", "standard", "power"),
                         default="quantile",
                         help="transform of numeric columns (docs/classifier.md; default: "
                         "quantile)")
    predict.add_argument("--prior-json", type=Path, default=None, metavar="PATH",
                         help="also write π's bound, point and interval to this JSON file "
                         "(default: not written)")
    predict.add_argument("--report", type=Path, default=None, metavar="FILE.html",
                         help="also write a page to look at: the held-out labeled positives' "
                         "p_positive against the pool's, π's bound, estimate, interval and "
                         "upper end, and what the portfolio chose (or why the model alone "
                         "scored the table); one self-contained HTML file, its figures also "
                         "written beside it as PNG (r.html: r_scores.png, r_prior.png and "
                         "r_choice.png); needs matplotlib: pip install 'puicl[report]' "
                         "(docs/classifier.md, \"A report to look at\"; default: not written)")
    predict.add_argument("--save-model", type=Path, default=None, metavar="DIR",
                         help="also save the fitted classifier to the folder DIR, without "
                         "pickle (PUICLClassifier.save; docs/classifier.md, \"Saving a fitted "
                         "classifier\"); a folder saved before is replaced if it holds "
                         "nothing else; checked before the fit (default: not saved)")
    predict.add_argument("--no-training-data", action="store_true",
                         help="with --save-model: save the fitted contexts' caches, not the "
                         "table, to score new rows only: ~40 MB per context of 1,000 pool rows "
                         "with 20 features (bundled model); π̂ fixed at save (default: the "
                         "table)")
    predict.add_argument("--model", type=Path, default=None, metavar="DIR",
                         help="score every row of --input with the classifier saved in DIR "
                         "instead of fitting one: no label column, and the fitting options "
                         "are not used (default: fit on the input)")
    predict.add_argument("--batch-rows", type=_at_least_one, default=DEFAULT_BATCH_ROWS,
                         help="rows read and scored at a time; the scores do not depend on it "
                         f"(default: {DEFAULT_BATCH_ROWS})")
    predict.add_argument("--scheduler", default=None, metavar="ADDRESS",
                         help="score the pool by partitions on the dask cluster at ADDRESS "
                         "(e.g. tcp://127.0.0.1:8786); the same scores as on one process "
                         "(default: this process)")
    predict.add_argument("--random-state", type=_count, default=0,
                         help="seed of every random choice; the same seed gives the same "
                         "scores on every machine (default: 0)")
    predict.add_argument("--no-progress", action="store_true",
                         help="no progress bars (default: bars on a terminal)")


def _progress(args: argparse.Namespace) -> bool | None:
    """The command's progress setting, handed down in the classifier's ``progress``, which
    every bar reads (:func:`puicl_model.passes.phases.shows_progress`): none with
    --no-progress, else the rule's own (a bar on a terminal, for long work). Kept unset (None)
    rather than decided here, so that a classifier saved by the command does not carry this
    terminal's decision."""
    return False if args.no_progress else None


def _classifier(args: argparse.Namespace):
    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.passes.settings import InferenceSettings

    # every inference setting has the option of its name (_parser); --pool-sample 0 is None
    settings = dataclasses.replace(InferenceSettings.read_from(args),
                                   pool_sample=args.pool_sample or None)
    return PUICLClassifier(
        weights=args.weights,
        device=args.device,
        **settings.arguments(),
        threshold=0.5 if args.threshold is None else args.threshold,
        categorical=args.categorical,
        numeric=args.numeric,
        random_state=args.random_state,  # the seed the pool's sample is drawn from, too
        progress=_progress(args),
        keep_columns=args.keep_columns or None,
    )


@contextlib.contextmanager
def _saving(args: argparse.Namespace, classifier: PUICLClassifier) -> Iterator[None]:
    """``--save-model``: the classifier written to a staging folder before the block runs, put
    in place after it; an error in either leaves the folder as it was."""
    if args.save_model is None:
        yield
        return
    from puicl_model.estimator.saved_model import saving

    try:
        with saving(classifier, args.save_model, training_data=not args.no_training_data):
            yield
    except OSError as err:  # (the block's own writes say which output failed)
        raise CliError(f"cannot write --save-model {args.save_model}: "
                       f"{err.strerror or err}") from None


def _write_scores(args: argparse.Namespace, classifier: PUICLClassifier, fitted: FittedPool,
                  n_pool: int) -> None:
    """The pool's scores to ``--output``, π's lines printed, and ``--prior-json``."""
    import warnings

    from puicl_model.estimator.prior_report import ThresholdWarning
    from puicl_model.files.large_tables import score_pool
    from puicl_model.files.table_io import BatchWriter

    # π̂, bound and interval first: the labels' cut is checked against them (below)
    report = classifier.class_prior_report()
    writer = BatchWriter(args.output)
    try:
        with writer.open(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ThresholdWarning)  # (said once, below)
            if args.scheduler is not None:
                from puicl_model.files.dask_scoring import score_pool_on_dask

                negative = score_pool_on_dask(classifier, fitted, writer.write,
                                              args.scheduler, args.batch_rows)
            else:
                negative = score_pool(classifier, fitted, writer.write, args.batch_rows)
    except OSError as err:  # a full disk, no permission, ...: atomic, so nothing is left
        # (strerror: the error's filename would be the temporary file, not the output)
        raise CliError(f"cannot write --output {args.output}: {err.strerror or err}") from None
    say_the_cut(classifier)
    read = f", read on a seeded sample of {fitted.n_fitted}" if fitted.sampled else ""
    message = "\n".join([
        f"π̂ (estimated negative share of the {n_pool} unlabeled rows{read}): "
        f"{report.estimate:.4f}; predicted negative: {negative}", *prior_lines(report),
        portfolio_line(classifier)])
    if args.output == "-":
        print(message, file=sys.stderr)
    else:
        print(f"wrote {writer.rows} rows to {args.output}")
        print(message)
    if args.prior_json is not None:  # after the scores: a failed write leaves no JSON
        try:
            atomic_write_json(args.prior_json, {**report.to_dict(), "n_unlabeled": n_pool})
        except OSError as err:
            raise CliError(f"cannot write --prior-json {args.prior_json}: "
                           f"{err.strerror or err}") from None
        print(f"wrote π's report to {args.prior_json}", file=sys.stderr)


def _predict(args: argparse.Namespace) -> int:
    from puicl_model.files.large_tables import (
        bound_process_memory,
        fit_on_input,
        open_input,
    )

    if args.model is not None:
        refuse_unused_by_model(args, _parser().parse_args(["predict"]))
        check_paths(args)
        return _predict_with_saved(args)
    if args.no_training_data and args.save_model is None:
        raise CliError("--no-training-data goes with --save-model DIR")
    check_paths(args)
    if args.scheduler is not None:  # a wrong address fails now, not after the fit
        from puicl_model.files.dask_scoring import check_scheduler

        try:
            check_scheduler(args.scheduler)
        except ImportError as err:  # dask is an extra
            raise CliError(str(err)) from None
    source = open_input(input_path=args.input, label_column=args.label_column,
                        positives=args.positives, unlabeled=args.unlabeled,
                        drop_columns=args.drop_columns, batch_rows=args.batch_rows)
    if args.scheduler is not None:  # what the workers cannot read as one process: now
        from puicl_model.files.dask_scoring import check_pool_file

        check_pool_file(source)
    unknown = [name for name in args.keep_columns if name not in source.features]
    if unknown:
        raise CliError(f"--keep-columns: no such feature column(s) {unknown}")
    if len(source.pool_rows) > args.batch_rows:  # read in several batches: keep memory flat
        bound_process_memory()
    classifier = _classifier(args)
    fitted = fit_on_input(classifier, source, args.batch_rows)
    with _saving(args, classifier):  # a save that fails does so before any score is written
        _write_scores(args, classifier, fitted, len(source.pool_rows))
    if args.save_model is not None:
        print(f"saved the fitted classifier to {args.save_model}", file=sys.stderr)
    if args.report is not None:  # last: it reads the scores the lines above printed
        try:
            drawn = classifier.plot_report(args.report)
        except OSError as err:
            raise CliError(f"cannot write --report {args.report}: "
                           f"{err.strerror or err}") from None
        names = ", ".join(str(where) for where in drawn.figure_paths.values())
        print(f"wrote the report to {args.report} (figures: {names})", file=sys.stderr)
    return 0


def _predict_with_saved(args: argparse.Namespace) -> int:
    """``--model DIR``: every row of ``--input`` scored by the saved classifier, a batch at a
    time (a row equal to a fitted pool row gets its fitted score, as in ``predict_proba``;
    saved with ``--no-training-data``, every row is scored as a new row)."""
    import warnings

    from puicl_model.estimator.classifier import NoTrainingDataError, PUICLClassifier
    from puicl_model.estimator.prior_report import ThresholdWarning
    from puicl_model.files.large_tables import output_frame
    from puicl_model.files.table_io import BatchWriter, read_batches, scan_table

    classifier = PUICLClassifier.load(args.model, device=args.device)
    # this command's bars, not those of the run that saved it
    classifier.set_params(progress=_progress(args))
    if args.threshold is not None:  # the cut is a setting: the saved one otherwise
        classifier.set_params(threshold=args.threshold)
    scan = scan_table(args.input, None, args.batch_rows)
    unknown = [name for name in args.drop_columns if name not in scan.columns]
    if unknown:
        raise CliError(f"--drop-columns: no such column(s) {unknown}")
    writer = BatchWriter(args.output)
    try:
        with writer.open(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ThresholdWarning)  # (said once, below)
            for batch in read_batches(scan, args.batch_rows):
                features = batch.drop(columns=args.drop_columns)
                proba, labels = classifier.predict_and_proba(features)
                writer.write(output_frame(batch.index.to_numpy(), proba[:, 1], labels))
    except OSError as err:  # atomic: nothing is left
        raise CliError(f"cannot write --output {args.output}: {err.strerror or err}") from None
    except NoTrainingDataError as err:  # --threshold prior on a folder without its π̂
        raise CliError(f"--threshold {args.threshold}: {err}") from None
    say_the_cut(classifier)
    print(f"scored {writer.rows} rows with the classifier saved in {args.model}",
          file=sys.stderr if args.output == "-" else sys.stdout)
    return 0


def _info(args: argparse.Namespace) -> int:
    import json

    from puicl_common.configio import to_dict
    from puicl_model.net.weights import (
        bundled_weights_path,
        load_model,
        resolve_weights_path,
        stored_checksum,
    )

    model = load_model(args.weights)  # None: the bundled model, or a one-line error
    path = resolve_weights_path(args.weights if args.weights is not None
                                else bundled_weights_path())
    bundled = ("  (the model bundled with puicl; its card: docs/model_card.md)"
               if args.weights is None else "")
    print(f"weights: {path}{bundled}")
    print(f"tensors_sha256: {stored_checksum(path)}")
    print(json.dumps(to_dict(model.config), indent=2, sort_keys=True))
    counts = model.parameter_counts()
    print("parameters: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return 0


class _Terminated(BaseException):
    """SIGTERM, raised wherever the program is so that it unwinds as on Ctrl-C: a half-written
    output is removed and no traceback is printed. A BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into :class:`_Terminated` while the command runs, then restore the
    previous handler (``main`` is also called in-process, by tests and scripts)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread, where alone Python can handle signals
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with _sigterm_unwinds():
            if args.command == "predict":
                return _predict(args)
            return _info(args)
    except (CliError, ValueError, OSError) as err:
        # one line: messages carrying pandas' text can end in (or hold) a newline
        message = " ".join(line.strip() for line in str(err).strip().splitlines())
        print(f"puicl {args.command}: error: {message}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, _Terminated) as stop:
        # the shell's convention: 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)
        signum = stop.signum if isinstance(stop, _Terminated) else signal.SIGINT
        print(f"puicl {args.command}: interrupted", file=sys.stderr)
        return 128 + int(signum)


if __name__ == "__main__":
    sys.exit(main())
