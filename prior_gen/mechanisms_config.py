"""Configuration of real-table tasks (``prior.real_tables``), the prior's one mechanism beyond
the paper's MLP SCM: with a probability per task, the task is cut from a corpus of real tables
instead of the SCM's output (``prior_gen.real_tables``).

Absent (``None``) by default, which is also its legacy value: a config without it keeps its
hash, its shards and its checkpoints (the versioning rule, ``prior_gen.config.LEGACY_VALUES``,
docs/architecture.md §6). This module imports nothing from ``prior_gen.config`` (which
imports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from puicl_common.configio import require

__all__ = ["RealTablesConfig"]


def _probability(value: float, key: str) -> None:
    require(0.0 <= value <= 1.0, key, f"must lie in [0, 1], got {value}")


@dataclass(frozen=True)
class RealTablesConfig:
    """``prior.real_tables``: with probability ``probability`` a task is cut from an entry of
    the corpus at ``corpus`` (``scripts/build_real_corpus.py``), whose SHA-256 must be
    ``sha256``; the digest, not the path, is what the config's hash covers the corpus by."""

    corpus: str = "data/real_corpus.npz"
    sha256: str = ""
    probability: float = 0.5
    # True: a task to be replaced is cut from the corpus before its SCM would run, and the SCM
    # does not run (faster generation); its metadata then holds the plan's factors alone.
    # False: the replaced task's SCM runs, as in shards made before this key existed.
    skip_scm: bool = False

    def validate(self) -> None:
        _probability(self.probability, "probability")
        require(isinstance(self.skip_scm, bool), "skip_scm", "must be true or false")
        require(bool(self.corpus), "corpus", "must name the corpus file")
        require(len(self.sha256) == 64 and all(c in "0123456789abcdef" for c in self.sha256),
                "sha256", "must be the corpus file's SHA-256 (64 lower-case hex digits), as "
                "scripts/build_real_corpus.py prints it")
