"""PUICL: in-context positive-unlabeled classification for tabular data.

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.

``from puicl_model import PUICLClassifier`` is the public entry point. Heavy submodules
(torch) are imported on first use, so that ``import puicl_model`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from puicl_common import __version__  # from the installed package's metadata

# public name -> submodule that defines it
_LAZY = {
    "PUICLClassifier": "puicl_model.estimator.classifier",
    "PUICLModel": "puicl_model.net.model",
    "ModelConfig": "puicl_model.net.config",
    "TaskBatch": "puicl_model.net.batch",
    "collate_tasks": "puicl_model.net.batch",
    "save_weights": "puicl_model.net.weights",
    "load_weights": "puicl_model.net.weights",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'puicl_model' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
