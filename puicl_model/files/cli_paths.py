"""The paths ``puicl predict`` writes and reads, checked before the model runs: an output that
cannot be written, or that names a file the command reads, is refused in one line, not after
the fit."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from puicl_common.output_paths import OutputPathError, check_output_path, resolved_output

__all__ = ["CliError", "check_paths"]


class CliError(Exception):
    """A problem with the command line or its input files (exit status 2)."""


def _check_output(output: str) -> None:
    """Refuse an ``--output`` the CSV cannot be written to before the model runs, not after."""
    if output == "-":
        return
    if output == "":
        # Path("") is the current directory: the message would name a directory nobody gave
        raise CliError("--output must be a file path, got an empty string")
    try:
        resolved_output(output, "--output")
    except OutputPathError as err:
        raise CliError(str(err)) from None
    path = Path(output)
    if path.is_dir():
        raise CliError(f"--output {output} is a directory; give the path of a CSV or Parquet "
                       "file")
    if path.is_block_device() or path.is_socket():
        # (a character device or a FIFO is written to, as by the shell's ">")
        raise CliError(f"--output {output} is a block device or a socket; give the path of a "
                       "CSV or Parquet file")
    # missing parent directories are created when the CSV is written; the nearest existing
    # ancestor must be a directory for that to work (a farther one then is too)
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise CliError(f"--output {output}: {ancestor} exists and is not a directory")
            break


def _check_prior_json(path: Path | None) -> None:
    """Refuse a ``--prior-json`` path that cannot be written before the model runs, not after
    the scores are written."""
    if path is None:
        return
    if str(path) in ("", ".") or path.is_dir():
        raise CliError(f"--prior-json {path} is a directory; give the path of a JSON file")
    try:
        check_output_path(path, "file", "--prior-json")
    except OutputPathError as err:
        raise CliError(str(err)) from None


def _check_report(path: Path | None) -> dict[str, Path]:
    """Refuse a ``--report`` that cannot be drawn or written before the model runs: matplotlib
    missing (an extra), a directory, a path under a file. Returns the files it writes."""
    if path is None:
        return {}
    from puicl_model.estimator.report import figure_paths, require_matplotlib

    try:
        require_matplotlib()
    except ImportError as err:
        raise CliError(f"--report: {err}") from None
    if str(path) in ("", ".") or path.is_dir():
        raise CliError(f"--report {path} is a directory; give the path of an HTML file")
    written = {"--report": path, **{f"--report's {name} figure": figure
                                    for name, figure in figure_paths(path).items()}}
    for option, where in written.items():
        try:
            check_output_path(where, "file", option)
        except OutputPathError as err:
            raise CliError(str(err)) from None
    return written


def _check_writable(option: str, output: str | Path) -> None:
    """Refuse an output whose folder refuses new files (read-only, no permission), before the
    model runs: the atomic write creates a temporary file there. Tried by creating and
    removing one, as permission bits alone do not say it (root, read-only mounts)."""
    path = Path(output)
    if path.exists() and not path.is_file():
        return  # a device or a FIFO is written through, not replaced
    folder = Path(os.path.realpath(path)).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # missing folders are created where the nearest one allows
    try:
        handle, probe = tempfile.mkstemp(prefix=".puicl-probe-", dir=folder)
    except OSError as err:
        raise CliError(f"cannot write {option} {output}: {folder}: "
                       f"{err.strerror or err}") from None
    os.close(handle)
    os.unlink(probe)


def _weights_read(weights: Path | None) -> dict[str, Path | None]:
    """The files a run reads its weights from (the safetensors file and the config beside
    it), named as the user knows them; resolved as the classifier resolves them."""
    from puicl_model.net.weights import (
        CONFIG_FILE,
        WeightsError,
        bundled_weights_path,
        resolve_weights_path,
    )

    if weights is None:
        name, path = "the bundled weights", bundled_weights_path()
    else:
        try:
            name, path = "--weights", resolve_weights_path(weights)
        except WeightsError:  # reported when the weights are loaded
            return {"--weights": weights}
    if path is None:
        return {}
    return {name: path, f"the config beside {name}": path.parent / CONFIG_FILE}


def check_paths(args: argparse.Namespace) -> None:
    """Refuse, before the model runs, outputs that cannot be written or that name a file the
    command reads (an input table, the weights, a ``--model`` folder's files; through links
    and other spellings alike), a ``--save-model`` folder a save may not replace or that
    would take an input or another output with it, and the same file given as both tables."""
    from puicl_common.same_file import SameFileError, refuse_output_among_inputs, same_file
    from puicl_model.estimator.saved_folder import folder_files

    _check_output(args.output)
    _check_prior_json(args.prior_json)
    if (args.positives is not None and args.unlabeled is not None
            and same_file(args.positives, args.unlabeled) and args.positives.exists()):
        raise CliError(f"--positives {args.positives} and --unlabeled {args.unlabeled} are one "
                       "file; give the labeled positives and the unlabeled rows in two files")
    outputs = {"--output": None if args.output == "-" else args.output,
               "--prior-json": args.prior_json, **_check_report(args.report)}
    inputs = {"--input": args.input, "--positives": args.positives,
              "--unlabeled": args.unlabeled, **_weights_read(args.weights),
              **(folder_files(args.model) if args.model is not None else {})}
    try:
        refuse_output_among_inputs(outputs, inputs)
    except SameFileError as err:
        raise CliError(str(err)) from None
    if args.save_model is not None:
        _check_save_model(args.save_model, outputs, inputs)
    for option, path in outputs.items():
        if path is not None:
            _check_writable(option, path)


def _inside(path: str | Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies in it, as the file system resolves both."""
    here, there = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return here == there or there in here.parents


def _check_save_model(folder: Path, outputs: dict[str, str | Path | None],
                      inputs: dict[str, str | Path | None]) -> None:
    """Refuse a ``--save-model`` folder before the model runs: one a save may not replace
    (:func:`~puicl_model.estimator.saved_folder.check_replaceable`), one that holds an input
    or an output of this command (a save replaces the folder whole: they would be deleted),
    or one whose parent folder refuses new folders."""
    from puicl_model.estimator.saved_folder import SavedModelError, check_replaceable

    try:
        check_replaceable(folder)
        check_output_path(folder, "directory", "--save-model")
    except (SavedModelError, OutputPathError) as err:
        message = str(err)
        raise CliError(message if message.startswith("--save-model")
                       else f"--save-model {message}") from None
    for kind, paths in (("writes", outputs), ("reads", inputs)):
        for option, path in paths.items():
            if path is not None and _inside(path, folder):
                raise CliError(f"{option} {path}, which this command {kind}, lies in "
                               f"--save-model {folder}: the save replaces that folder whole "
                               "and would delete it; give another path")
    parent = Path(os.path.realpath(folder)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # missing folders are created where the nearest one allows
    try:
        probe = tempfile.mkdtemp(prefix=".puicl-probe-", dir=parent)
    except OSError as err:
        raise CliError(f"cannot write --save-model {folder}: {parent}: "
                       f"{err.strerror or err}") from None
    os.rmdir(probe)
