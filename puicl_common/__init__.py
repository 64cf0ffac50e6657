"""Helpers shared by every part of puicl: configuration loading, atomic file writes, and the

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.
choice of device and precision.

This package sits upstream of all others (``prior_gen``, ``trainer``, ``puicl_model``,
``benchmark`` import it; it imports none of them), and its modules import neither torch nor
numpy at module level, so the prior generator's worker processes load it cheaply.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("puicl")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
