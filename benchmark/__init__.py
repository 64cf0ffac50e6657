"""The PU benchmark of paper §6: datasets, the PU task protocol, metrics, baselines, `puicl-bench`.

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.

Modules:

* :mod:`benchmark.datasets` — loaders for the 20 UCI datasets of Table 1 (raw files).
* :mod:`benchmark.devsuite` — the development suite's 40 tables, on which decisions are made.
* :mod:`benchmark.suites` — the two collections of tables behind one interface.
* :mod:`benchmark.protocol` — PU task construction (§6.1) and the seed keys.
* :mod:`benchmark.metrics` — AUC (Mann–Whitney), accuracy, positive-class F1.
* :mod:`benchmark.methods` — one interface ``fit_predict(X, s, seed)`` for PUICL and baselines.
* :mod:`benchmark.runner` — parallel execution with a per-replicate cache.
* :mod:`benchmark.report` — CSV, Table-1-style markdown, plot, provenance.
* :mod:`benchmark.summary` — a suite's figure over several π, with its standard error.
* :mod:`benchmark.cli` — the ``puicl-bench`` command.
"""

from __future__ import annotations

__all__: list[str] = []
