"""The collections of tables the PU protocol runs on, behind one interface.

* ``benchmark``: the 20 UCI datasets of the paper's Table 1 (``benchmark/datasets.py``). It
  reports shipped models and is never tuned on.
* ``dev``: the development suite of 40 other real tables (``benchmark/devsuite.py``). Every
  choice of the project is made on it.

A suite names its tables, loads one as a :class:`benchmark.datasets.Dataset`, gives each a
display name and the files it was read from (for the run's provenance), and says whether the
paper's Table 1 describes its tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmark.datasets import (
    DATASET_SLUGS,
    SPECS,
    DataError,
    Dataset,
    load_dataset,
    resolve_data_dir,
)
from benchmark.devsuite import (
    devsuite_file,
    devsuite_slugs,
    load_devsuite_table,
    resolve_devsuite_dir,
)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    # the paper's Table 1 holds these tables' figures (comparison and marks in the reports)
    in_paper: bool
    _slugs: Callable[[Path | None], tuple[str, ...]]
    _load: Callable[[str, Path | None], Dataset]
    _root: Callable[[Path | None], Path]
    _files: Callable[[str], tuple[str, ...]]
    _display: Callable[[str], str]

    def slugs(self, data_dir: Path | None = None) -> tuple[str, ...]:
        return self._slugs(data_dir)

    def load(self, slug: str, data_dir: Path | None = None) -> Dataset:
        return self._load(slug, data_dir)

    def root(self, data_dir: Path | None = None) -> Path:
        """The folder the suite's files are read from."""
        return self._root(data_dir)

    def files(self, slug: str) -> tuple[str, ...]:
        """The files a table is read from, relative to :meth:`root`."""
        return self._files(slug)

    def display_name(self, slug: str) -> str:
        return self._display(slug)


SUITES: dict[str, Suite] = {
    "benchmark": Suite(
        name="benchmark",
        description="the paper's 20 UCI datasets (§6, Table 1)",
        in_paper=True,
        _slugs=lambda data_dir: DATASET_SLUGS,
        _load=load_dataset,
        _root=resolve_data_dir,
        _files=lambda slug: SPECS[slug].files,
        _display=lambda slug: SPECS[slug].name,
    ),
    "dev": Suite(
        name="dev",
        description="the development suite of 40 real tables from R packages",
        in_paper=False,
        _slugs=devsuite_slugs,
        _load=load_devsuite_table,
        _root=resolve_devsuite_dir,
        _files=lambda slug: (devsuite_file(slug),),
        _display=lambda slug: slug,
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise DataError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    return SUITES[name]
