"""A fitted classifier saved to a folder and loaded back, without pickle
(``PUICLClassifier.save`` / ``PUICLClassifier.load``, ``puicl predict --save-model/--model``).

Layout of the folder::

    manifest.json        format name and version, the sha256 of every other file, the
                         versions of puicl, numpy, scikit-learn and torch it was saved
                         under (a load under others warns: the last bits of the scores may
                         move), and the sha256 of the manifest's own content
    state.json           the classifier's settings and fitted state as JSON: column
                         encodings, pass planners, the portfolio's choice and blend
    arrays.safetensors   every array of that state (the encoded table, the scores, the
                         logistic learners' coefficients), referenced by name from state.json
    weights/             the model's weights (:func:`puicl_model.net.weights.save_weights`)
    contexts.safetensors (saved without the training table only) the fitted contexts' caches
                         (:mod:`puicl_model.estimator.saved_contexts`)

Saved without its training table (``training_data=False``): the encoded rows (the views',
``x_labeled_``, ``x_pool_``, the portfolio's) and every per-row score of the fitted table are left
out, and the fitted contexts' caches stand in for them, so the loaded classifier scores every row
as a new row. What stays of the table: the column encodings (for ``numeric="quantile"`` each
numeric column's sorted fitted values, the map of its ranks), the learners' fitted models, and
the chosen blend's sorted pool scores and probabilities (the pool's score distribution that maps
a blended score to a probability, no row's own score). Such a folder is written as version
:data:`WITHOUT_TRAINING_DATA_VERSION`, a folder with its table as :data:`FORMAT_VERSION`
(:mod:`~.saved_folder`: the versions of earlier puicl releases are still read, and a puicl that
predates a version refuses it in one line naming it).

Why not pickle: loading a pickle runs whatever code it names. Here the JSON names classes only
by the type tags of :data:`puicl_model.estimator.saved_state.TYPES`, a fixed list of the
project's own plain-data classes (and scikit-learn's ``LogisticRegression``, whose fitted state
is arrays); each is rebuilt from its attributes, so loading runs none of the file's choosing.
Objects shared in the classifier (the configured view's rows and its ``x_labeled_``) are
written once and shared again on load.

The tree learners (PU bagging's random forests, scikit-learn's trees grown by
:class:`~puicl_model.estimator.direct_forest.DirectForest` or by its ``RandomForestClassifier``,
and the boosted learner's ``HistGradientBoostingClassifier``) keep their trees in objects with
no public way to rebuild them: their trees are saved as node arrays and scored by
:class:`puicl_model.estimator.saved_trees.ForestTrees` and
:class:`~puicl_model.estimator.saved_trees.BoostedTrees`, the same bits. Learners the chosen
blend does not weigh are not needed to score new rows and are left out.

What a saved folder is, and how a save replaces one, is :mod:`~.saved_folder`'s; the checks a
folder's declared state passes before ``load`` builds anything, :mod:`~.saved_checks`'s (the
checksums vouch only that the files are those the manifest lists, which anyone can recompute).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from puicl_common.atomic import atomic_write_bytes, atomic_write_json
from puicl_model.estimator.fitted_scorer import (
    SAVED_CLASSIFIER,
    ContextsOnly,
    FittedScorer,
    NoTrainingDataError,
)
from puicl_model.estimator.fitted_table import FittedTable
from puicl_model.estimator.input_checks import check_settings
from puicl_model.estimator.saved_checks import (
    ARRAY_DTYPES,
    CACHE_DTYPES,
    check_contexts,
    check_fitted,
    check_safetensors,
    read_json,
)
from puicl_model.estimator.saved_contexts import (
    classifier_contexts,
    read_contexts,
    write_contexts,
)
from puicl_model.estimator.saved_folder import (
    ARRAYS,
    CONTEXTS,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    STATE,
    WEIGHTS,
    WITH_TABLE_VERSIONS,
    WITHOUT_TRAINING_DATA_VERSION,
    SavedModelError,
    changed_libraries,
    check_replaceable,
    discard,
    entry_kind,
    library_versions,
    manifest_for,
    publish,
    read_manifest,
    stage,
)
from puicl_model.estimator.saved_state import Decoder, Encoder
from puicl_model.estimator.saved_trees import BoostedTrees, ForestTrees
from puicl_model.passes.settings import InferenceSettings

if TYPE_CHECKING:
    import torch

    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.estimator.learners import LearnerModel
    from puicl_model.net.config import ModelConfig

__all__ = ["FORMAT", "FORMAT_VERSION", "WITHOUT_TRAINING_DATA_VERSION", "SavedModelError",
           "load", "save", "saving"]

# ---------------------------------------------------------------------------------- save
def _savable(model: LearnerModel) -> LearnerModel:
    """A learner's fitted model as save writes it: a linear one as it is (its state is arrays),
    boosted trees and random forests as node arrays (puicl_model.estimator.saved_trees; a
    loaded classifier's already are)."""
    if hasattr(model, "coef_") or isinstance(model, (BoostedTrees, ForestTrees)):
        return model
    if hasattr(model, "estimators_"):  # PU bagging's random forest
        forest = ForestTrees.from_sklearn(model)
        forest.check_against(model)
        return forest
    trees = BoostedTrees.from_sklearn(model)
    trees.check_against(model)
    return trees


def _fitted_state(classifier: PUICLClassifier, training_data: bool) -> dict[str, Any]:
    """The classifier's saved state: its scikit-learn fitted attributes and its fitted object's
    declared state (``SAVED``), less the portfolio's learners its chosen blend does not weigh;
    without ``training_data``, what a scorer without the table holds (the table's rows and
    their scores left out)."""
    scorer = classifier.fitted_
    if not training_data and isinstance(scorer, FittedTable):
        scorer = scorer.without_table(classifier._runtime())
    state = {name: getattr(classifier, name) for name in SAVED_CLASSIFIER
             if name in vars(classifier)}
    state.update(scorer.saved_state())
    portfolio = scorer.portfolio
    if portfolio is not None:
        weighed = set(portfolio.choice.weights) if portfolio.choice is not None else set()
        learners = {kind: learner for kind, learner in portfolio.learners.items()
                    if kind in weighed}
        learners = {kind: dataclasses.replace(learner, models_=[
            _savable(model) for model in learner.models_]) for kind, learner in learners.items()}
        state["portfolio_"] = dataclasses.replace(portfolio, learners=learners)
        if not training_data:  # the learners' rows, and every per-row score they read
            state["portfolio_"] = dataclasses.replace(
                state["portfolio_"], x_labeled=None, x_pool=None, labeled_scores={},
                pool_scores={}, evidence=None, member_pool_scores={})
    return state


def _settings(classifier: PUICLClassifier) -> dict[str, Any]:
    settings = dict(classifier.get_params(deep=False))
    settings["weights"] = None  # the saved folder's weights/ stand in for them
    for name, stored in InferenceSettings.STORED_NAMES.items():  # a former name, still taken
        former = settings.pop(stored, None)  # (saved as the setting it stands for)
        if former is not None:
            settings[name] = former
    if not isinstance(settings["random_state"], (int, type(None))):
        # a RandomState or Generator gave the fit one root seed: that seed refits the same
        settings["random_state"] = int(classifier.fitted_.entropy)
    return settings


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:  # in pieces: a folder's caches can be gigabytes
        for piece in iter(lambda: file.read(1 << 24), b""):
            digest.update(piece)
    return digest.hexdigest()


@contextlib.contextmanager
def saving(classifier: PUICLClassifier, directory: str | Path, training_data: bool = True,
           ) -> Iterator[Path]:
    """Write the fitted ``classifier`` to a staging folder beside ``directory``, run the
    ``with`` block, then put the folder in place (:mod:`~.saved_folder`); an exception in the
    block, or in the writing, leaves ``directory`` as it was and no staging folder. ``puicl
    predict --save-model`` writes its scores inside the block: a save that fails (a full disk)
    fails before any score is written. A write the file system refuses raises an ``OSError``
    naming ``directory``, not the staging folder."""
    classifier._check_fitted()
    if training_data and not classifier.fitted_.has_table:
        raise NoTrainingDataError("this PUICLClassifier was saved without its training data: "
                                  "save it again with training_data=False")
    given = Path(directory)
    check_replaceable(given)
    # where the file system puts it (a name of its own for ".", "a/..", "link/.."): the
    # staging folder goes beside that, and that is what publish checks again and replaces
    directory = Path(os.path.realpath(given))
    try:
        staging = stage(directory)
    except OSError as err:
        raise _save_failed(given, err) from None
    try:
        try:
            _write_folder(classifier, staging, training_data)
        except OSError as err:
            raise _save_failed(given, err) from None
        yield given
        try:
            publish(staging, directory)
        except OSError as err:
            raise _save_failed(given, err) from None
    finally:
        discard(staging)  # (gone already once published)


def _save_failed(given: Path, err: OSError) -> OSError:
    """The error of a save the file system refused (read-only, full): of the same kind,
    naming the folder the user gave rather than the staging folder beside it."""
    return OSError(err.errno, err.strerror or str(err), str(given))


def _write_folder(classifier: PUICLClassifier, staging: Path, training_data: bool) -> None:
    """The saved folder's files, written to ``staging`` (the module's layout)."""
    from safetensors.numpy import save as save_arrays

    from puicl_model.net.weights import save_weights

    encoder = Encoder()
    state = {"settings": encoder.encode(_settings(classifier)),
             "fitted": encoder.encode(_fitted_state(classifier, training_data))}
    if not training_data:
        state["contexts"] = write_contexts(classifier_contexts(classifier), staging / CONTEXTS)
    atomic_write_bytes(staging / ARRAYS, save_arrays(encoder.arrays))
    atomic_write_json(staging / STATE, state)
    save_weights(classifier.model_, staging / WEIGHTS)
    files = {path.relative_to(staging).as_posix(): _sha256(path)
             for path in sorted(staging.rglob("*")) if path.is_file()}
    atomic_write_json(staging / MANIFEST, manifest_for(
        files, FORMAT_VERSION if training_data else WITHOUT_TRAINING_DATA_VERSION,
        library_versions()))


def save(classifier: PUICLClassifier, directory: str | Path, training_data: bool = True) -> Path:
    """Write the fitted ``classifier`` to ``directory``: created, or a classifier saved there
    before replaced; any other path that exists refused (:func:`~.saved_folder.
    check_replaceable`). A reader sees the old folder or the whole new one. Without
    ``training_data``: the fitted contexts' caches instead of the table (the module's note)."""
    with saving(classifier, directory, training_data) as given:
        pass
    return given


# ---------------------------------------------------------------------------------- load
def _verified(directory: Path) -> dict[str, Any]:
    """The manifest, after every file it lists is checked against its sha256."""
    manifest = read_manifest(directory)
    weights = entry_kind(directory / WEIGHTS)
    if weights not in ("a folder", "missing"):  # (missing: said of its files below)
        raise SavedModelError(f"{directory / WEIGHTS} is {weights or 'a file'}, not the "
                              "folder a save writes")
    for name, digest in manifest["files"].items():
        path = directory / name
        kind = entry_kind(path)
        if kind == "missing":
            raise SavedModelError(f"{path}: missing from the saved classifier")
        if kind is not None:
            raise SavedModelError(f"{path} is {kind}, not the file a save writes")
        if _sha256(path) != digest:
            raise SavedModelError(f"{path}: checksum mismatch; the file is damaged or was "
                                  "changed after it was saved")
    return manifest


def _identity(directory: Path) -> tuple[int, ...] | None:
    """What tells one saved folder at ``directory`` from the next one saved there."""
    try:
        folder, manifest = os.stat(directory), os.lstat(directory / MANIFEST)
    except OSError:
        return None
    return folder.st_dev, folder.st_ino, manifest.st_ino, manifest.st_mtime_ns


_ATTEMPTS = 5


def load(classifier_class: type, directory: str | Path, device: str = "auto") -> Any:
    """The classifier (of ``classifier_class``, which calls this from its ``load``) saved in
    ``directory``, its model on ``device``. A folder saved again while it is read is read
    again: the result is the old folder's classifier or the new one's, never a mix."""
    directory = Path(directory)
    for attempt in range(_ATTEMPTS):
        before = _identity(directory)
        try:
            classifier = _load_once(classifier_class, directory, device)
        except (SavedModelError, OSError) as err:
            if _identity(directory) == before:  # not a save under way: the folder's fault
                if isinstance(err, OSError):
                    raise SavedModelError(f"{directory}: cannot read the saved classifier: "
                                          f"{err.strerror or err}") from None
                raise
        else:
            if _identity(directory) == before:
                return classifier
        time.sleep(0.02 * (attempt + 1))  # a save in progress there: read its result
    raise SavedModelError(f"{directory} kept changing while it was read (saved again "
                          "meanwhile?); load it again")


def _load_once(classifier_class: type, directory: Path, device: str) -> Any:
    from puicl_common.runtime import resolve_device
    from puicl_model.net.weights import load_model

    manifest = _verified(directory)
    with_table = manifest["version"] in WITH_TABLE_VERSIONS
    changed = changed_libraries(manifest)
    if changed:
        import warnings

        warnings.warn(f"{directory} was saved under other library versions ({changed}): "
                      "its scores may differ in their last bits from those it gave there",
                      stacklevel=3)
    state, settings, fitted = _state(directory, with_table)
    try:
        for name, stored in InferenceSettings.STORED_NAMES.items():  # an earlier folder's
            if stored in settings and name not in settings:
                settings[name] = settings.pop(stored)
        classifier = classifier_class(**{**settings, "device": device})
        check_settings(classifier)  # as fit checks them
    except (TypeError, ValueError) as err:
        raise SavedModelError(f"{directory / STATE}: settings puicl does not take "
                              f"({type(err).__name__}: {str(err)[:200]})") from None
    portfolio = fitted.get("portfolio_")
    if portfolio is not None and portfolio.choice is not None and any(
            kind not in portfolio.learners for kind in portfolio.choice.weights if kind != "model"):
        raise SavedModelError(f"{directory}: the saved portfolio lacks a learner its chosen "
                              "blend weighs; save the classifier again")
    for name in SAVED_CLASSIFIER:
        if name in fitted:
            setattr(classifier, name, fitted[name])
    classifier.device_ = resolve_device(device, training=False)
    classifier.model_ = load_model(directory / WEIGHTS, classifier.device_)
    classifier.fitted_ = _scorer(directory, state, fitted, with_table, classifier.device_,
                                 classifier.model_.config)
    return classifier


def _scorer(directory: Path, state: dict, fitted: dict, with_table: bool,
            device: torch.device, config: ModelConfig) -> FittedScorer:
    """The fitted object of the folder's declared state: the table, indexed, or the fitted
    contexts' caches read from contexts.safetensors in its place."""
    try:
        if with_table:
            table = FittedTable.from_saved(fitted)
            table.index_rows()
            return table
        scorer = ContextsOnly.from_saved(fitted)
    except (TypeError, ValueError) as err:
        raise SavedModelError(f"{directory / STATE}: not a state puicl wrote "
                              f"({type(err).__name__}: {str(err)[:200]})") from None
    path = directory / CONTEXTS
    check_contexts(path, state["contexts"], scorer.planners, config,
                   check_safetensors(path, CACHE_DTYPES))
    try:
        scorer.saved_contexts = read_contexts(state["contexts"], path, scorer.planners, device)
        scorer.contexts = scorer.whole_store()  # (before any thread scores)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise SavedModelError(f"{path}: not the caches puicl wrote "
                              f"({type(err).__name__}: {err})") from None
    return scorer


def _state(directory: Path, with_table: bool) -> tuple[dict, dict, dict]:
    """state.json as read (checked for its keys), its settings and its fitted state, decoded
    and checked (:mod:`~.saved_checks`) before the classifier is built."""
    from safetensors.numpy import load_file

    path = directory / STATE
    state = read_json(path)
    keys = {"settings", "fitted"} | (set() if with_table else {"contexts"})
    if not isinstance(state, dict) or set(state) != keys:
        raise SavedModelError(f"{path}: not a state puicl wrote (it holds "
                              f"{', '.join(sorted(keys))})")
    check_safetensors(directory / ARRAYS, ARRAY_DTYPES)  # before any array is read
    try:  # intact files that are not what save writes (made by hand): one line all the same
        arrays = load_file(str(directory / ARRAYS))
        decoder = Decoder(path, arrays)
        settings = decoder.decode(state["settings"])
        fitted = decoder.decode(state["fitted"])
        if not isinstance(settings, dict) or not all(isinstance(k, str) for k in settings):
            raise TypeError("settings that are no mapping")
        check_fitted(path, fitted, with_table, arrays)
    except SavedModelError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ImportError, IndexError,
            OverflowError, RecursionError) as err:
        raise SavedModelError(f"{path}: not a state puicl wrote "
                              f"({type(err).__name__}: {str(err)[:200]})") from None
    return state, settings, fitted
