"""A saved classifier's state as JSON and arrays, and back
(:mod:`puicl_model.estimator.saved_model`'s state.json and arrays.safetensors).

:class:`Encoder` turns the fitted state into JSON-ready values and sets its arrays aside by
name; :class:`Decoder` rebuilds it, naming classes only by the tags of :data:`TYPES` and
checking what each entry declares before it is built (:mod:`~.saved_checks`): a scalar's dtype,
an array's shape, an object's fields and their types.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from puicl_model.estimator.saved_checks import check_fields, check_scalar_dtype, check_shape
from puicl_model.estimator.saved_folder import SavedModelError

__all__ = ["FORMER_NAMES", "TYPES", "Decoder", "Encoder"]

# the only classes state.json may name, by their stable type tags: plain data of the project
# (the trees as node arrays among them), and scikit-learn's linear model (coefficients
# and settings only). A tag names a class whatever module holds it; folders of format versions
# 1 and 2 named them by their module paths, which are read as the tags they map to
TYPES = {
    "TablePreprocessor": "puicl_model.estimator.preprocessing.TablePreprocessor",
    "ColumnEncoding": "puicl_model.estimator.column_encoding.ColumnEncoding",
    "View": "puicl_model.estimator.ensemble.View",
    "PassPlanner": "puicl_model.passes.planning.PassPlanner",
    "Portfolio": "puicl_model.estimator.portfolio.Portfolio",
    "CrossFittedLearner": "puicl_model.estimator.learners.CrossFittedLearner",
    "Choice": "puicl_model.estimator.portfolio_rule.Choice",
    "Blend": "puicl_model.estimator.portfolio.Blend",
    "Evidence": "puicl_model.estimator.portfolio_rule.Evidence",
    "BoostedTrees": "puicl_model.estimator.saved_trees.BoostedTrees",
    "ForestTrees": "puicl_model.estimator.saved_trees.ForestTrees",
    "sklearn.LogisticRegression": "sklearn.linear_model._logistic.LogisticRegression",
}
_TAGS = {path: tag for tag, path in TYPES.items()}
# the module paths earlier folders named the classes by: those of today's modules, and those
# of a folder saved before the package was laid out in wings
FORMER_NAMES = _TAGS | {
    f"puicl_model.{module}.{name}": name
    for module, name in (
        ("preprocessing", "TablePreprocessor"),
        ("column_encoding", "ColumnEncoding"),
        ("planning", "PassPlanner"),
        ("portfolio", "Portfolio"),
        ("portfolio", "Choice"),
        ("portfolio", "Blend"),
        ("portfolio", "Evidence"),
        ("saved_trees", "BoostedTrees"),
    )
} | {
    # the module paths of format 1 and 2 folders, before the portfolio's rule had its own
    "puicl_model.estimator.portfolio.Choice": "Choice",
    "puicl_model.estimator.portfolio.Evidence": "Evidence",
    "puicl_model.planning.View": "View",
    "puicl_model.portfolio.CrossFittedLearner": "CrossFittedLearner",
}


class Encoder:
    """The state as JSON-ready values, its arrays set aside by name."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._seen: dict[int, int] = {}  # id of a shared object -> its number
        self._keep: list[Any] = []  # keeps numbered objects alive, so ids stay unique

    def _shared(self, value: Any) -> dict | None:
        number = self._seen.get(id(value))
        if number is not None:
            return {"__ref__": number}
        self._seen[id(value)] = len(self._keep)
        self._keep.append(value)
        return None

    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value if isinstance(value, int) or np.isfinite(value) else {
                "__float__": repr(value)}
        if isinstance(value, np.generic):
            return {"__scalar__": value.dtype.str, "value": self.encode(value.item())}
        if isinstance(value, np.dtype):
            return {"__dtype__": value.str}
        if isinstance(value, np.ndarray):
            return self._shared(value) or self._array(value)
        if isinstance(value, (list, tuple)):
            items = [self.encode(item) for item in value]
            return items if isinstance(value, list) else {"__tuple__": items}
        if isinstance(value, (set, frozenset)):
            return {"__set__": [self.encode(item) for item in sorted(value, key=repr)]}
        if isinstance(value, dict):
            return {"__items__": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        name = f"{type(value).__module__}.{type(value).__qualname__}"
        if name not in _TAGS:
            raise TypeError(f"cannot save a {name} in a PUICL classifier folder")
        return self._shared(value) or {
            "__object__": _TAGS[name], "__id__": self._seen[id(value)],
            "state": self.encode(dict(vars(value)))}

    def _array(self, array: np.ndarray) -> dict:
        number = self._seen[id(array)]
        if array.dtype.kind in "biuf":
            key = f"a{number}"
            self.arrays[key] = np.ascontiguousarray(array)
            return {"__array__": key, "__id__": number}
        if array.dtype.kind == "O":  # names and categories: text, numbers or None
            return {"__objects__": [self.encode(item) for item in array.ravel().tolist()],
                    "shape": list(array.shape), "__id__": number}
        if array.dtype.kind == "U":
            return {"__text__": array.ravel().tolist(), "shape": list(array.shape),
                    "__id__": number}
        raise TypeError(f"cannot save an array of dtype {array.dtype}")


class Decoder:
    """The state :class:`Encoder` wrote, rebuilt from state.json's values (at ``path``, which
    messages name) and the arrays of arrays.safetensors; every entry checked as it is read.
    State of another form raises :class:`SavedModelError` (or a KeyError, TypeError or
    ValueError, which the loader words as one)."""

    def __init__(self, path: Path, arrays: dict[str, np.ndarray]) -> None:
        self.path = path
        self.arrays = arrays
        self._built: dict[int, Any] = {}

    def decode(self, value: Any) -> Any:
        if not isinstance(value, (list, dict)):
            return value
        if isinstance(value, list):
            return [self.decode(item) for item in value]
        if "__ref__" in value:
            return self._built[value["__ref__"]]
        if "__float__" in value:
            return float(str(value["__float__"])[:40])
        if "__scalar__" in value:
            dtype = check_scalar_dtype(self.path, value["__scalar__"], "biuf")
            number = self.decode(value["value"])
            if not isinstance(number, (int, float)):
                raise TypeError(f"a {dtype} scalar of {type(number).__name__}")
            return dtype.type(number)
        if "__dtype__" in value:
            return check_scalar_dtype(self.path, value["__dtype__"], "biufcOUSMm")
        if "__tuple__" in value:
            return tuple(self.decode(item) for item in value["__tuple__"])
        if "__set__" in value:
            return {self.decode(item) for item in value["__set__"]}
        if "__items__" in value:
            return {_hashable(self.decode(k)): self.decode(v) for k, v in value["__items__"]}
        return self._built_entry(value)

    def _built_entry(self, value: dict) -> Any:
        if "__array__" in value:
            return self._keep(value, self.arrays[value["__array__"]])
        if "__objects__" in value:
            items = [self.decode(item) for item in value["__objects__"]]
            array = np.empty(len(items), dtype=object)
            array[:] = items
            return self._keep(value, array.reshape(check_shape(self.path, value["shape"],
                                                               len(items))))
        if "__text__" in value:
            text = value["__text__"]
            if not isinstance(text, list) or not all(isinstance(item, str) for item in text):
                raise TypeError("text entries that are not text")
            shape = check_shape(self.path, value["shape"], len(text))
            return self._keep(value, np.array(text, dtype=str).reshape(shape))
        if "__object__" in value:
            return self._object(value)
        raise SavedModelError(f"{self.path}: an entry of unknown kind {sorted(value)[:3]}")

    def _keep(self, value: dict, built: Any) -> Any:
        number = value["__id__"]
        if type(number) is not int or number in self._built:
            raise ValueError(f"an entry numbered {str(number)[:20]}")
        self._built[number] = built
        return built

    def _object(self, value: dict) -> Any:
        name = value["__object__"]
        name = FORMER_NAMES.get(name, name) if isinstance(name, str) else name
        if name not in TYPES:
            raise SavedModelError(f"{self.path} names the class {str(name)[:80]}, which puicl "
                                  "does not load")
        module, _, qualname = TYPES[name].rpartition(".")
        cls = getattr(importlib.import_module(module), qualname)
        instance = cls.__new__(cls)  # no __init__: the attributes are set as they were saved
        self._keep(value, instance)
        attributes = self.decode(value["state"])
        if not isinstance(attributes, dict) or not all(isinstance(k, str) for k in attributes):
            raise TypeError(f"a {qualname} whose state is no mapping")
        for key, item in attributes.items():
            object.__setattr__(instance, key, item)  # (frozen dataclasses too)
        check_fields(self.path, instance)
        return instance


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
