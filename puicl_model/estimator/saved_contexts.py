"""The fitted contexts' caches of a classifier saved without its training table
(``PUICLClassifier.save(directory, training_data=False)``,
:mod:`puicl_model.estimator.saved_model`).

A new row is scored against the keys and values of the fitted contexts
(:mod:`puicl_model.passes.query_rows`), never against the table's rows themselves: so a folder
that holds every context's cache scores new rows as the fitted classifier does, bit for bit on
the same device, without the table. ``contexts.safetensors`` holds the caches' tensors by name;
state.json lists, per context, the pass planner (its index in ``planners_``), the feature group
and chunk that key it, the tensors' name and its number of blocks.

The caches are larger than the table they stand for: a context of r rows and d features caches
2·(L-1)·r·(d+1)·e + 2·r·e floats (``DEFAULT_CACHE_BYTES``'s note), ~40 MB for a chunk of 1,000
pool rows next to 300 labeled rows with 20 features for the bundled model, where the chunk's
rows are ~0.1 MB as float32.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from puicl_model.estimator.saved_folder import CONTEXTS
from puicl_model.net.backends.cached_context import ContextCache
from puicl_model.passes.planning import PassPlanner
from puicl_model.passes.query_rows import context_key, fitted_contexts

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier

__all__ = ["CONTEXTS", "classifier_contexts", "read_contexts", "write_contexts"]

Context = tuple[int, int, int, ContextCache]  # planner's index, feature group, chunk, cache


def classifier_contexts(classifier: PUICLClassifier) -> Iterable[Context]:
    """Every fitted context of ``classifier`` with its cache: computed from its table, or (a
    classifier loaded without its table) the caches it was loaded with."""
    from puicl_model.estimator.fitted_scorer import ContextsOnly

    scorer = classifier.fitted_
    if isinstance(scorer, ContextsOnly):
        index = {planner: number for number, planner in enumerate(scorer.planners)}
        return [(index[key[0]], key[1], key[2], cache)
                for key, cache in scorer.saved_contexts.items()]
    views = [view.rows() for view in classifier.views_]
    return fitted_contexts(classifier.model_, views, classifier.planners_,
                           device=classifier.device_, n_threads=classifier.n_threads)


def _array(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype != torch.float32:  # (the query path computes in float32 on any device)
        raise TypeError(f"a context cache of dtype {tensor.dtype}; puicl saves float32 caches")
    return np.ascontiguousarray(tensor.detach().cpu().numpy())


def write_contexts(contexts: Iterable[Context], path: Path) -> list[dict[str, int | str]]:
    """Write the caches' tensors to ``path`` (safetensors); their entries for state.json."""
    from safetensors.numpy import save_file

    entries: list[dict[str, int | str]] = []
    arrays: dict[str, np.ndarray] = {}
    for number, (planner, group, chunk, cache) in enumerate(contexts):
        name = f"c{number}"
        arrays[f"{name}.mean"], arrays[f"{name}.scale"] = _array(cache.mean), _array(cache.scale)
        for block, (keys, values) in enumerate(zip(cache.keys, cache.values, strict=True)):
            arrays[f"{name}.keys.{block}"] = _array(keys)
            arrays[f"{name}.values.{block}"] = _array(values)
        entries.append({"planner": planner, "group": group, "chunk": chunk, "tensors": name,
                        "blocks": len(cache.keys)})
    save_file(arrays, str(path))
    with path.open("rb+") as written:  # on disk before the manifest that vouches for it
        os.fsync(written.fileno())
    return entries


def read_contexts(entries: Sequence[dict[str, Any]], path: Path,
                  planners: Sequence[PassPlanner], device: torch.device,
                  ) -> dict[Hashable, ContextCache]:
    """The caches ``write_contexts`` wrote, on ``device``, keyed as the query path looks them
    up (:func:`puicl_model.passes.query_rows.context_key`). A context missing here would have
    to be computed from the table: refused (KeyError) rather than found missing later."""
    from safetensors.numpy import load_file

    arrays = load_file(str(path))
    if not all(np.isfinite(array).all() for array in arrays.values()):
        raise ValueError("caches holding NaN or infinite values")
    # the features' scales divide each new row's values (at least the standardization's floor)
    if not all((array > 0).all() for name, array in arrays.items() if name.endswith(".scale")):
        raise ValueError("caches holding feature scales of 0 or below")

    def tensor(name: str) -> torch.Tensor:
        return torch.from_numpy(arrays[name]).to(device)

    caches: dict[Hashable, ContextCache] = {}
    for entry in entries:
        name, blocks = entry["tensors"], int(entry["blocks"])
        planner = planners[int(entry["planner"])]
        caches[context_key(planner, int(entry["group"]), int(entry["chunk"]), device)] = \
            ContextCache(tensor(f"{name}.mean"), tensor(f"{name}.scale"),
                         tuple(tensor(f"{name}.keys.{block}") for block in range(blocks)),
                         tuple(tensor(f"{name}.values.{block}") for block in range(blocks)))
    expected = {context_key(planner, group, chunk, device) for planner in planners
                for group in range(planner.n_feature_groups)
                for chunk in range(planner.n_contexts)}
    if set(caches) != expected:
        raise KeyError(f"{path.name} holds {len(caches)} of the {len(expected)} fitted contexts")
    return caches
