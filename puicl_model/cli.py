"""``puicl``: command-line access to the PUICL classifier.

``puicl predict`` reads a PU table from CSV in one of two layouts

* one table with a 0/1 label column: ``--input table.csv --label-column s``
  (1 = labeled positive, 0 = unlabeled), or
* two tables with the same columns (matched by name, in any order):
  ``--positives pos.csv --unlabeled unl.csv``,

fits :class:`~puicl_model.classifier.PUICLClassifier` and writes one CSV row per unlabeled row
(``row``: its 0-based position among the data rows of its input file; ``p_positive``;
``label``: 1 = positive, 0 = negative), then prints π̂, the estimated negative share of the
unlabeled rows, with what the data identify about it (``class_prior_report``: a lower bound,
π̂'s interval, a flag), also written as JSON with ``--prior-json PATH``. ``puicl info WEIGHTS``
prints a checkpoint's config and parameter counts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import stat
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from puicl_common.atomic import atomic_write_json, atomic_write_text

if TYPE_CHECKING:
    import pandas as pd

    from puicl_model.prior_report import ClassPriorReport

__all__ = ["main"]


class CliError(Exception):
    """A problem with the command line or its input files (exit status 2)."""


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


def _parser() -> argparse.ArgumentParser:
    # the inference defaults and their limits are written once, with the classifier
    from puicl_model.settings import InferenceSettings

    parser = argparse.ArgumentParser(prog="puicl", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    predict = commands.add_parser(
        "predict",
        help="score the unlabeled rows of a PU table given as CSV",
        description="Score the unlabeled rows of a PU table: writes row, p_positive, label "
        "per unlabeled row and prints the estimated negative share π̂.",
    )
    layout = predict.add_argument_group("input (one of the two layouts)")
    layout.add_argument("--input", type=Path, help="one CSV table with a label column")
    layout.add_argument("--label-column", help="the 0/1 column of --input (1 = labeled positive)")
    layout.add_argument("--positives", type=Path, help="CSV of the labeled positives")
    layout.add_argument("--unlabeled", type=Path, help="CSV of the unlabeled rows")
    predict.add_argument("--output", "-o", default="-",
                         help="output CSV (default: standard output)")
    predict.add_argument("--weights", type=Path, default=None,
                         help="checkpoint directory or .safetensors file (default: bundled)")
    predict.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")
    defaults = InferenceSettings()
    predict.add_argument("--n-estimators", type=int, default=defaults.n_estimators,
                         help="ensemble members (docs/classifier.md, \"Ensembles\"; default: "
                         "1 for numeric tables, 2 for tables with categorical columns; at most "
                         f"{InferenceSettings.MAXIMUM['n_estimators']})")
    predict.add_argument("--single-pass-limit", type=int, default=defaults.single_pass_limit,
                         help="pools up to this many rows are scored in one pass (default "
                         f"{defaults.single_pass_limit})")
    predict.add_argument("--chunk-size", type=int, default=defaults.chunk_size,
                         help=f"chunk length for larger pools (default {defaults.chunk_size})")
    predict.add_argument("--max-labeled", type=int, default=defaults.max_labeled,
                         help="most labeled positives in one pass; more are subsampled "
                         f"(default {defaults.max_labeled})")
    predict.add_argument("--threshold", type=_threshold, default=0.5,
                         help="cut on p_positive, or 'prior' to label the share π̂ negative")
    predict.add_argument("--drop-columns", nargs="*", default=[],
                         help="columns to ignore (identifiers, ...)")
    predict.add_argument("--categorical", choices=("onehot", "ordinal", "frequency"),
                         default="onehot", help="encoding of text/category columns")
    predict.add_argument("--numeric", choices=("quantile", "standard", "power"),
                         default="quantile",
                         help="transform of numeric columns (docs/classifier.md)")
    predict.add_argument("--prior-json", type=Path, default=None, metavar="PATH",
                         help="also write π's bound, point and interval to this JSON file")
    predict.add_argument("--partner", choices=InferenceSettings.CHOICES["partner"],
                         default=defaults.partner,
                         help="auto (default): on tables with many labeled positives, blend the "
                         "model with a logistic partner fitted on every row, the blend chosen "
                         "on held-out labeled positives; none: the model alone "
                         "(docs/classifier.md, \"Tables of every size\")")
    predict.add_argument("--random-state", type=int, default=0)
    predict.add_argument("--no-progress", action="store_true", help="no progress bar")

    info = commands.add_parser("info", help="print a checkpoint's model config")
    info.add_argument("weights", type=Path)
    return parser


def _read_csv(path: Path, label_column: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(the table of ``path``, the names of the saved-index columns left out of it).

    A column whose header cell is empty (pandas names it ``Unnamed: N``) and whose values are
    distinct whole numbers is what ``DataFrame.to_csv()`` writes for the index: row numbers,
    not a feature. Kept as one, it can tell the labeled positives from the unlabeled rows by
    where they were numbered, and wreck the scores; it is left out, with a note on stderr.
    """
    import pandas as pd

    try:
        # the header as written: pandas renames a repeated name (a, a.1) and an empty one
        # (Unnamed: N), hiding both; the same parser reads both, so the cells line up
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise CliError(f"input file not found: {path}") from None
    except (OSError, ValueError) as err:  # pandas' parser errors are ValueErrors
        raise CliError(f"cannot read {path} as CSV: {err}") from None
    names = [str(name) for name in header.iloc[0]] if len(header) else []
    repeated = sorted(name for name, count in Counter(names).items() if name and count > 1)
    if repeated:
        # the Python API refuses such a table; reading it renamed would accept it here
        raise CliError(f"{path} has duplicate column names {repeated}; give each column its "
                       "own name")
    if len(table) == 0:
        raise CliError(f"{path} has no data rows")
    saved_index: list[str] = []
    if len(names) == len(table.columns):  # the two reads agree unless the file is ragged
        for position, (name, column) in enumerate(zip(names, table.columns, strict=True)):
            values = table[column]
            if (name == "" and column != label_column
                    and pd.api.types.is_integer_dtype(values.dtype) and values.is_unique):
                saved_index.append(column)
                print(f"puicl predict: note: {path}: column {position + 1} has no header and "
                      "holds distinct whole numbers: a saved index; not used as a feature",
                      file=sys.stderr)
    return table.drop(columns=saved_index), saved_index


def _load_table(args: argparse.Namespace):
    """(features DataFrame, s array, row numbers of the unlabeled rows)."""
    import numpy as np
    import pandas as pd

    one_table = args.input is not None or args.label_column is not None
    two_tables = args.positives is not None or args.unlabeled is not None
    if one_table == two_tables:
        raise CliError("give either --input with --label-column, or --positives with --unlabeled")
    if one_table:
        if args.input is None or args.label_column is None:
            raise CliError("--input and --label-column go together")
        table, saved_index = _read_csv(args.input, args.label_column)
        if args.label_column not in table.columns:
            raise CliError(f"{args.input} has no column {args.label_column!r}; its columns are "
                           f"{list(table.columns)}")
        if args.label_column in args.drop_columns:
            raise CliError(f"--drop-columns: {args.label_column!r} is the label column "
                           "(--label-column); it is read as the label and cannot be dropped")
        labels = table[args.label_column]
        if labels.isna().any():
            raise CliError(f"column {args.label_column!r} has empty entries; mark every row 1 "
                           f"(labeled positive) or 0 (unlabeled)")
        features = table.drop(columns=[args.label_column])
        s = labels.to_numpy()
        unlabeled_rows = None  # known after s has been validated by the classifier
    else:
        if args.positives is None or args.unlabeled is None:
            raise CliError("--positives and --unlabeled go together")
        positives, saved_index = _read_csv(args.positives)
        unlabeled, unlabeled_index = _read_csv(args.unlabeled)
        saved_index += unlabeled_index
        # columns are matched by name: the same columns in another order are the same table
        lacking = [c for c in positives.columns if c not in unlabeled.columns]
        extra = [c for c in unlabeled.columns if c not in positives.columns]
        if lacking or extra:
            raise CliError(
                f"{args.positives} and {args.unlabeled} must have the same columns (in any "
                f"order); {args.unlabeled} "
                + "; ".join(
                    ([f"lacks {lacking}"] if lacking else [])
                    + ([f"has {extra}, which {args.positives} lacks"] if extra else [])
                )
            )
        unlabeled = unlabeled[list(positives.columns)]
        features = pd.concat([positives, unlabeled], ignore_index=True)
        s = np.concatenate([np.ones(len(positives), np.int64), np.zeros(len(unlabeled), np.int64)])
        unlabeled_rows = np.arange(len(unlabeled))
    # a saved index named here (as users did before it was left out) is gone already
    missing = [c for c in args.drop_columns if c not in features.columns and c not in saved_index]
    if missing:
        raise CliError(f"--drop-columns: no such column(s) {missing}")
    dropped = [c for c in args.drop_columns if c in features.columns]
    features = features.drop(columns=dropped)
    if features.shape[1] == 0:
        # said here, in the table's terms, rather than as the classifier's "X has 0 features"
        source = args.input if one_table else f"{args.positives} and {args.unlabeled}"
        besides = (([f"the label column {args.label_column!r}"] if one_table else [])
                   + ([f"a saved index {saved_index}"] if saved_index else [])
                   + ([f"--drop-columns {dropped}"] if dropped else []))
        raise CliError(f"{source} has no feature columns"
                       + (" besides " + " and ".join(besides) if besides else ""))
    return features, s, unlabeled_rows


def _check_output(output: str) -> None:
    """Refuse an ``--output`` the CSV cannot be written to before the model runs, not after."""
    if output == "-":
        return
    if output == "":
        # Path("") is the current directory: the message would name a directory nobody gave
        raise CliError("--output must be a file path, got an empty string")
    path = Path(output)
    if path.is_dir():
        raise CliError(f"--output {output} is a directory; give the path of a CSV file")
    if path.is_block_device() or path.is_socket():
        # (a character device or a FIFO is written to, as by the shell's ">")
        raise CliError(f"--output {output} is a block device or a socket; give the path of a "
                       "CSV file")
    # missing parent directories are created when the CSV is written; the nearest existing
    # ancestor must be a directory for that to work (a farther one then is too)
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise CliError(f"--output {output}: {ancestor} exists and is not a directory")
            break


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one existing regular file, through links and other spellings
    (``./t.csv``, ``dir/../t.csv``, a symbolic or hard link) alike."""
    try:
        one, other = os.stat(first), os.stat(second)
    except OSError:
        return False  # an output that does not exist yet overwrites nothing
    # regular files only: a terminal may be both stdin and stdout, and writing to a device
    # replaces nothing
    return (stat.S_ISREG(one.st_mode) and stat.S_ISREG(other.st_mode)
            and os.path.samestat(one, other))


def _check_output_is_no_input(args: argparse.Namespace) -> None:
    """Refuse an ``--output`` that names a file the command reads: the scores would replace it."""
    if args.output == "-":
        return
    for option, given in (("--input", args.input), ("--positives", args.positives),
                          ("--unlabeled", args.unlabeled), ("--weights", args.weights)):
        if given is not None and _same_file(Path(args.output), given):
            raise CliError(f"--output {args.output} is the file given as {option} {given}; "
                           "the scores would overwrite it: write them to another path")


def _check_prior_json(args: argparse.Namespace) -> None:
    """Refuse a ``--prior-json`` path that cannot be written, or that names a file the command
    reads or writes, before the model runs."""
    path = args.prior_json
    if path is None:
        return
    if str(path) in ("", ".") or path.is_dir():
        raise CliError(f"--prior-json {path} is a directory; give the path of a JSON file")
    for option, given in (("--input", args.input), ("--positives", args.positives),
                          ("--unlabeled", args.unlabeled), ("--weights", args.weights),
                          ("--output", None if args.output == "-" else Path(args.output))):
        if given is not None and (_same_file(path, given) or path.resolve() == given.resolve()):
            raise CliError(f"--prior-json {path} is the file given as {option} {given}: "
                           "write π's report to another path")


def _prior_lines(report: ClassPriorReport) -> list[str]:
    """The class-prior report as printed: the bound, the point with its interval, the note."""
    bound = "none" if report.lower_bound is None else f"{report.lower_bound:.4f}"
    low, high = report.interval
    return [f"π bound (identified lower bound of the negative share): {bound}; "
            f"π̂ {report.estimate:.4f}, {report.level:.0%} interval [{low:.4f}, {high:.4f}]; "
            f"read π in [{report.lower_bound or 0.0:.4f}, {report.upper:.4f}]",
            report.note]  # says whether π is identified, and what that means for the cut


def _predict(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from puicl_model.classifier import PUICLClassifier

    _check_output(args.output)
    _check_output_is_no_input(args)
    _check_prior_json(args)
    features, s, unlabeled_rows = _load_table(args)
    classifier = PUICLClassifier(
        weights=args.weights,
        device=args.device,
        n_estimators=args.n_estimators,
        single_pass_limit=args.single_pass_limit,
        chunk_size=args.chunk_size,
        max_labeled=args.max_labeled,
        threshold=args.threshold,
        categorical=args.categorical,
        numeric=args.numeric,
        partner=args.partner,
        random_state=args.random_state,
        progress=False if args.no_progress else None,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        classifier.fit(features, s)
    # columns read as numeric or dropped, and why: said on stderr, never silently
    for warning in caught:
        if issubclass(warning.category, UserWarning):
            print(f"puicl predict: note: {warning.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
    is_unlabeled = np.asarray(s).astype(np.float64) == 0
    if unlabeled_rows is None:
        unlabeled_rows = np.flatnonzero(is_unlabeled)
    pool = features[is_unlabeled]
    proba = classifier.predict_proba(pool)[:, 1]
    labels = classifier.predict(pool)
    report = classifier.class_prior_report()  # π̂ with its bound and interval (no new pass)
    pi_hat = report.estimate
    result = pd.DataFrame({"row": unlabeled_rows, "p_positive": proba, "label": labels})
    buffer = io.StringIO()
    result.to_csv(buffer, index=False, float_format="%.6f")
    message = (
        f"π̂ (estimated negative share of the {len(pool)} unlabeled rows): {pi_hat:.4f}; "
        f"predicted negative: {int((labels == 0).sum())}"
    )
    message = "\n".join([message, *_prior_lines(report)])
    if args.output == "-":
        sys.stdout.write(buffer.getvalue())
        print(message, file=sys.stderr)
    else:
        try:
            atomic_write_text(args.output, buffer.getvalue())
        except OSError as err:  # a full disk, no permission, ...: atomic, so nothing is left
            raise CliError(f"cannot write --output {args.output}: {err}") from None
        print(f"wrote {len(result)} rows to {args.output}")
        print(message)
    if args.prior_json is not None:  # after the scores: a failed CSV write leaves no JSON
        try:
            atomic_write_json(args.prior_json, {**report.to_dict(), "n_unlabeled": len(pool)})
        except OSError as err:
            raise CliError(f"cannot write --prior-json {args.prior_json}: {err}") from None
        print(f"wrote π's report to {args.prior_json}", file=sys.stderr)
    return 0


def _info(args: argparse.Namespace) -> int:
    import json

    from puicl_common.configio import to_dict
    from puicl_model.weights import load_weights, resolve_weights_path

    model = load_weights(args.weights)
    print(f"weights: {resolve_weights_path(args.weights)}")
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
