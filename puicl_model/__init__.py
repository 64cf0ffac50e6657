"""PUICL: in-context positive-unlabeled classification for tabular data.

``from puicl_model import PUICLClassifier`` is the public entry point. Heavy submodules
(torch) are imported on first use so that light users of this package (the prior generator's
worker processes use :mod:`puicl_common.configio`) do not pay for them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> submodule that defines it
_LAZY = {
    "PUICLClassifier": "puicl_model.classifier",
    "PUICLModel": "puicl_model.model",
    "ModelConfig": "puicl_model.config",
    "TaskBatch": "puicl_model.batch",
    "collate_tasks": "puicl_model.batch",
    "save_weights": "puicl_model.weights",
    "load_weights": "puicl_model.weights",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'puicl_model' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
