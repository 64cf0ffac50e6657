"""The checks a saved classifier's declared state passes before anything is built from it
(:func:`puicl_model.estimator.saved_model.load`).

A folder's checksums say only that its files are the ones its manifest lists: anyone can
recompute them, so a folder from someone else is untrusted input. What its files declare (the
safetensors headers' dtypes, shapes and offsets, state.json's nesting, scalars and classes, the
fitted objects' fields, the trees' nodes, the contexts' caches) is checked against what scoring
reads, and against the files' own sizes, before an array is allocated or an object used: a
declared shape of 10¹² or a JSON nested 100,000 deep is one line of :class:`SavedModelError`,
not a memory error or a traceback. Float arrays must be finite: a NaN weight or cache would
give NaN scores.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_model.estimator.saved_folder import SavedModelError
from puicl_model.estimator.saved_values import check_values

if TYPE_CHECKING:
    from puicl_model.estimator.ensemble import View
    from puicl_model.estimator.portfolio import Portfolio
    from puicl_model.net.config import ModelConfig
    from puicl_model.passes.planning import PassPlanner

__all__ = ["ARRAY_DTYPES", "CACHE_DTYPES", "MAX_DEPTH", "check_contexts", "check_fields",
           "check_fitted", "check_safetensors", "check_scalar_dtype", "check_shape",
           "read_json"]

MAX_DEPTH = 64  # a saved state nests about a dozen levels
# the dtypes save writes to arrays.safetensors (safetensors' names), and to the caches
ARRAY_DTYPES = {"F64": 8, "F32": 4, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
                "U16": 2, "U8": 1, "BOOL": 1}
CACHE_DTYPES = {"F32": 4}
_HEADER_BYTES = 100 << 20  # safetensors' own limit on a header


def _fail(path: Path, what: str) -> SavedModelError:
    return SavedModelError(f"{path}: {what}; not what puicl saves")


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: a deep value must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def read_json(path: Path, text: str | bytes | None = None) -> Any:
    """``path``'s JSON (or ``text``), refused if it nests deeper than :data:`MAX_DEPTH`."""
    try:
        value = json.loads(path.read_bytes() if text is None else text)
    except RecursionError:
        raise _fail(path, f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise _fail(path, f"not JSON ({type(err).__name__})") from None
    if _depth(value) > MAX_DEPTH:
        raise _fail(path, f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def check_shape(path: Path, shape: Any, size: int | None = None) -> tuple[int, ...]:
    """A declared shape: a list of at most 8 whole numbers >= 0 (of ``size`` elements)."""
    if (not isinstance(shape, list) or len(shape) > 8
            or not all(type(n) is int and n >= 0 for n in shape)):
        raise _fail(path, f"a shape {str(shape)[:40]}")
    if size is not None and math.prod(shape) != size:
        raise _fail(path, f"a shape {shape} for {size} values")
    return tuple(shape)


def check_safetensors(path: Path, dtypes: dict[str, int]) -> dict[str, tuple[str, tuple]]:
    """The tensors a safetensors file declares (name -> dtype, shape), after its header is
    checked against the file: dtypes among ``dtypes``, each tensor's bytes its shape's, in
    the file, none overlapping. A file that is no safetensors file is refused likewise."""
    size = path.stat().st_size
    with path.open("rb") as file:
        prefix = file.read(8)
        (length,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (size,)
        if length > min(size - 8, _HEADER_BYTES):
            raise _fail(path, "no safetensors header")
        header = read_json(path, file.read(length))
    if not isinstance(header, dict):
        raise _fail(path, "no safetensors header")
    data, tensors, spans = size - 8 - length, {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or entry.get("dtype") not in dtypes:
            raise _fail(path, f"tensor {name[:40]!r} of dtype "
                              f"{str(entry.get('dtype') if isinstance(entry, dict) else '?')[:10]}")
        shape = check_shape(path, entry.get("shape"))
        offsets = entry.get("data_offsets")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(n) is int for n in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data
                or offsets[1] - offsets[0] != math.prod(shape) * dtypes[entry["dtype"]]):
            raise _fail(path, f"tensor {name[:40]!r} of shape {list(shape)} outside the file")
        tensors[name] = (entry["dtype"], shape)
        spans.append(tuple(offsets))
    spans.sort()
    if any(end > start for (_, end), (start, _) in itertools.pairwise(spans)):
        raise _fail(path, "overlapping tensors")
    return tensors


def check_scalar_dtype(path: Path, text: Any, kinds: str) -> np.dtype:
    """A dtype named in state.json: of ``kinds`` (numpy's letters), at most 8 bytes per item
    for numbers (a void of 10¹² bytes would be allocated by its scalar)."""
    try:
        dtype = np.dtype(text) if isinstance(text, str) and len(text) < 16 else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in kinds or (dtype.kind in "biuf"
                                                    and dtype.itemsize > 8):
        raise _fail(path, f"a dtype {str(text)[:20]!r}")
    return dtype


# ------------------------------------------------------------------------- fitted objects
_SIMPLE = {"int": int, "float": (float, int), "bool": bool, "str": str, "None": type(None),
           "np.ndarray": np.ndarray, "dict": dict, "list": list, "tuple": tuple}


def _annotation_types(annotation: str) -> tuple[type, ...] | None:
    """The types a field's annotation admits, where it is made of simple types (None: not
    checked here)."""
    types: list[type] = []
    for part in annotation.split("|"):
        name = part.strip().split("[", 1)[0]
        if name not in _SIMPLE:
            return None
        kind = _SIMPLE[name]
        types.extend(kind if isinstance(kind, tuple) else (kind,))
        if name == "np.ndarray":  # (rows left out of a folder without its table: None)
            types.append(type(None))
    return tuple(types)


def check_fields(path: Path, instance: Any) -> None:
    """A rebuilt dataclass holds its fields and no others (a field with a default may be
    missing), each of the type its annotation names (a class renamed to another's name, or a
    list where a number belongs, is refused)."""
    cls = type(instance)
    if not dataclasses.is_dataclass(cls):
        return
    fields = {field.name: field for field in dataclasses.fields(cls)}
    # a folder saved before a field with a default was added lacks it: the default stands in
    required = {name for name, field in fields.items() if field.default is dataclasses.MISSING}
    if not required <= set(vars(instance)) <= set(fields):
        raise _fail(path, f"a {cls.__name__} with the fields "
                          f"{sorted(map(str, vars(instance)))[:6]}")
    for name, field in fields.items():
        types = _annotation_types(str(field.type))
        value = getattr(instance, name)
        if types is not None and (not isinstance(value, types) or (
                isinstance(value, bool) and bool not in types)):
            raise _fail(path, f"a {cls.__name__}.{name} of type {type(value).__name__}")


def _finite(path: Path, values: Iterable[np.ndarray]) -> None:
    for array in values:
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise SavedModelError(f"{path}: holds NaN or infinite values; the saved "
                                  "classifier is damaged (save it again from a healthy fit)")


def check_fitted(path: Path, fitted: object, with_table: bool, arrays: dict[str, np.ndarray],
                 ) -> None:
    """The fitted state as scoring reads it: the attributes the classifier needs, of their
    types; the table's rows present or absent as the folder's version says; the learners'
    models as they are fitted; every float array finite; then the values themselves
    (:func:`~.saved_values.check_values`: lengths, ranges, finite scalars, references)."""
    from puicl_model.estimator.ensemble import View
    from puicl_model.estimator.portfolio import Portfolio
    from puicl_model.passes.planning import PassPlanner

    if not isinstance(fitted, dict) or not all(isinstance(key, str) for key in fitted):
        raise _fail(path, "fitted state that is no mapping")
    views, planners = fitted.get("views_"), fitted.get("planners_")
    if (not isinstance(views, list) or not views
            or not all(isinstance(view, View) for view in views)
            or not isinstance(planners, list) or not planners
            or not all(isinstance(planner, PassPlanner) for planner in planners)):
        raise _fail(path, "no fitted views and pass planners")
    portfolio = fitted.get("portfolio_")
    if portfolio is not None and not isinstance(portfolio, Portfolio):
        raise _fail(path, f"a portfolio_ of type {type(portfolio).__name__}")
    table = ("x_labeled_", "x_pool_")
    if with_table != all(isinstance(fitted.get(name), np.ndarray) for name in table) or (
            not with_table and any(name in fitted for name in table)):
        raise _fail(path, "versions 1 and 3 hold the fitted table, 2 and 4 do not: the state "
                          "does not match its manifest's version")
    for view in views:
        if (view.x_pool is None) == with_table:
            raise _fail(path, "a view's rows do not match the manifest's version")
    for planner in planners:
        if not 0 <= planner.view < len(views):
            raise _fail(path, f"a pass planner of view {planner.view}")
        problem = _planner_problem(planner, views[planner.view], with_table)
        if problem:
            raise _fail(path, f"a pass planner with {problem}")
    if portfolio is not None:
        _check_learners(path, portfolio)
    _finite(path.with_name("arrays.safetensors"), arrays.values())
    check_values(path, fitted, with_table)  # the values themselves, now that their form is


def _planner_problem(planner: PassPlanner, view: View, with_table: bool) -> str | None:
    """What keeps a pass planner from planning passes over its view's rows (sizes of at
    least one; with the table, the view's row counts; the view's feature count). None:
    nothing."""
    sizes = ("n_labeled", "n_pool", "n_features", "single_pass_limit", "chunk_size",
             "max_labeled", "max_features")
    if any(getattr(planner, name) < 1 for name in sizes) or min(
            planner.entropy, planner.member) < 0 or not (
            0 < planner.labeled_share <= 1 and 0 < planner.feature_share <= 1):
        return "sizes below one, a seed or member below zero, or shares outside (0, 1]"
    keep = getattr(view.preprocessor, "keep_", None)
    if not isinstance(keep, np.ndarray) or planner.n_features != max(
            1, int(np.count_nonzero(keep))):
        return f"{planner.n_features} features for a view of another width"
    if with_table and (planner.n_pool, planner.n_labeled) != (len(view.x_pool),
                                                              len(view.x_labeled)):
        return f"{planner.n_pool} pool rows for a view of {len(view.x_pool)}"
    return None


def _check_learners(path: Path, portfolio: Portfolio) -> None:
    from puicl_model.estimator.learners import CrossFittedLearner
    from puicl_model.estimator.saved_trees import BoostedTrees, ForestTrees

    keep = getattr(portfolio.encoder, "keep_", None)
    if not isinstance(portfolio.learners, dict) or not isinstance(keep, np.ndarray):
        raise _fail(path, "portfolio learners that are no mapping, or no encoder")
    n_features = max(1, int(np.count_nonzero(keep)))  # (none kept: one column of zeros)
    for learner in portfolio.learners.values():
        if not isinstance(learner, CrossFittedLearner) or not isinstance(learner.models_, list):
            raise _fail(path, "a portfolio learner puicl does not save")
        for model in learner.models_:
            if isinstance(model, (BoostedTrees, ForestTrees)):
                problem = model.problem(n_features)
            else:
                problem = _linear_problem(model, n_features)
            if problem:
                raise _fail(path, f"a {learner.kind} learner with {problem}")


def _linear_problem(model: object, n_features: int) -> str | None:
    """What keeps a saved logistic regression from scoring rows (None: nothing)."""
    coef, intercept = getattr(model, "coef_", None), getattr(model, "intercept_", None)
    classes = getattr(model, "classes_", None)
    if not (isinstance(coef, np.ndarray) and coef.dtype == np.float64
            and coef.shape == (1, n_features)):
        return "coefficients of another shape or dtype"
    if not (isinstance(intercept, np.ndarray) and intercept.dtype == np.float64
            and intercept.shape == (1,)):
        return "an intercept of another shape or dtype"
    if not (isinstance(classes, np.ndarray) and classes.dtype.kind in "iu"
            and classes.tolist() == [0, 1]):
        return "classes other than 0 and 1"
    return None


# ---------------------------------------------------------------------------------- caches
def check_contexts(path: Path, entries: Any, planners: list[PassPlanner], config: ModelConfig,
                   tensors: dict[str, tuple[str, tuple]]) -> None:
    """The contexts state.json lists, against the planners (one per context each needs) and
    the model (each block's keys and values ``[columns, heads, rows, head_dim]``), and the
    tensors of contexts.safetensors (float32, the shapes those say), before any is read."""
    expected = sum(planner.n_feature_groups * planner.n_contexts for planner in planners)
    if not isinstance(entries, list) or len(entries) != expected:
        raise _fail(path, f"{len(entries) if isinstance(entries, list) else 'no'} contexts "
                          f"for the {expected} the pass planners need")
    heads, head_dim = config.num_heads, config.embed_dim // config.num_heads
    blocks = config.num_layers
    seen: set[tuple[int, int, int]] = set()
    for entry in entries:
        if not isinstance(entry, dict) or not all(
                type(entry.get(key)) is int for key in ("planner", "group", "chunk", "blocks")):
            raise _fail(path, "a context entry of another form")
        key = (entry["planner"], entry["group"], entry["chunk"])
        if (not 0 <= key[0] < len(planners) or key in seen
                or not 0 <= key[1] < planners[key[0]].n_feature_groups
                or not 0 <= key[2] < planners[key[0]].n_contexts or entry["blocks"] != blocks):
            raise _fail(path, f"a context entry {key} the pass planners do not have")
        seen.add(key)
        features = len(planners[key[0]].features_of(key[1]))  # (the group's, as scored)
        _check_cache(path, str(entry.get("tensors")), blocks, heads, head_dim, tensors,
                     features)


def _check_cache(path: Path, name: str, blocks: int, heads: int, head_dim: int,
                 tensors: dict[str, tuple[str, tuple]], features: int) -> None:
    """One context's tensors: its feature statistics of the group's ``features``, and each
    block's keys and values of one shape, over at least one row (a context of none would
    divide by zero when a row attends to it)."""
    mean, scale = tensors.get(f"{name}.mean"), tensors.get(f"{name}.scale")
    if mean is None or scale is None or len(mean[1]) != 1 or mean[1] != scale[1]:
        raise _fail(path, f"context {name[:20]!r} without its feature statistics")
    if mean[1][0] != features:
        raise _fail(path, f"context {name[:20]!r} of {mean[1][0]} features, where its feature "
                          f"group has {features}")
    columns, rows = mean[1][0] + 1, None  # the features' columns and the label's
    for block in range(blocks):
        for kind in ("keys", "values"):
            shape = tensors.get(f"{name}.{kind}.{block}", (None, None))[1]
            width = 1 if block == blocks - 1 else columns  # the last block: the label only
            if (shape is None or len(shape) != 4 or shape[0] != width or shape[1] != heads
                    or shape[3] != head_dim or shape[2] != (rows or shape[2]) or not shape[2]):
                raise _fail(path, f"context {name[:20]!r}'s {kind} of block {block} of shape "
                                  f"{list(shape) if shape else None}, not [{width}, {heads}, "
                                  f"rows (at least 1), {head_dim}]")
            rows = shape[2]
