"""Real-table tasks (``prior.real_tables``): some of the training tasks cut from real tables.

Every synthetic prior leaves a gap to real tables that no mechanism added to it closed on the
development suite (docs/recipe.md, "Prior v2"). Real-TabPFN continued TabPFN's pre-training
on real tables and gained on real benchmarks (Garg et al., arXiv 2507.03971); TabDPT trains on
real tables alone (Ma et al., arXiv 2410.18164). With probability ``probability`` per task
(first draw of the task's ``real_tables`` stream, ``prior_gen.paper.seeding.task_stream``) the
synthetic task's rows are replaced by rows of one entry of a corpus of real tables, built by
``scripts/build_real_corpus.py`` (an entry: one table's features, encoded as the classifier
encodes a user's table, and one binary target). The task keeps its sizes and its class
shares; from the same stream, in this order:

1. the entry: a table uniformly, then one of its targets uniformly;
2. which target value is the positive class (a fair coin);
3. a random order of the positive rows and one of the negative rows: the first ``n_labeled``
   positives are labeled, the pool takes the next positives and the first negatives in the
   synthetic task's numbers (all three scaled down together, keeping π, when the entry has too
   few rows of a class), and is shuffled;
4. a random order of the columns that vary over the task's rows, of which the first
   ``n_features`` (the synthetic task's count) are kept.

Only indexing and copies: the same bytes on every CPU. The corpus is read once per process and
checked against ``sha256`` (a corpus that differs is an error naming both digests). Metadata
``real_table``: the entry's index, -1 for a task left synthetic; a real task's SCM keys describe
the synthetic task it replaced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from prior_gen.config import RealTablesConfig
from prior_gen.engine.pu import plan_meta
from prior_gen.paper.factors import TaskPlan, n_negatives
from prior_gen.paper.reference import dropped_negatives
from prior_gen.paper.seeding import task_stream
from prior_gen.shards.storage import digest_path
from prior_gen.task import Task
from puicl_common.atomic import atomic_output

__all__ = ["CorpusError", "RealCorpus", "load_corpus", "real_task", "real_task_instead_of_scm",
           "write_corpus"]

_CORPUS_KEYS = ("values", "labels", "shapes", "tables", "names")


@dataclass(frozen=True)
class RealCorpus:
    """The entries of a corpus: ``x[e]`` float32 [rows, columns], ``y[e]`` int8 0/1."""

    x: tuple[np.ndarray, ...]
    y: tuple[np.ndarray, ...]
    entries_of_table: tuple[np.ndarray, ...]  # per table, its entries' indices
    rows_of_value: tuple[tuple[np.ndarray, np.ndarray], ...]  # per entry: rows with y 0, y 1
    names: tuple[dict[str, Any], ...]  # per table: {"table": "package::item", "targets": [...]}


def write_corpus(path: str | Path, entries: list[tuple[np.ndarray, np.ndarray]],
                 tables: list[int], names: list[dict[str, Any]]) -> str:
    """Write a corpus atomically (``puicl_common.atomic``); returns its SHA-256."""
    if not entries:
        raise ValueError("a real-table corpus needs at least one entry")
    shapes = np.array([x.shape for x, _ in entries], dtype=np.int64)
    arrays = {
        "values": np.concatenate([np.ascontiguousarray(x, np.float32).ravel() for x, _ in entries]),
        "labels": np.concatenate([np.asarray(y, np.int8) for _, y in entries]),
        "shapes": shapes,
        "tables": np.asarray(tables, dtype=np.int64),
        "names": np.frombuffer(json.dumps(names).encode(), dtype=np.uint8),
    }
    with atomic_output(path) as temporary, open(temporary, "wb") as out:
        np.savez(out, **arrays)  # to the handle: np.savez would add ".npz" to a bare name
    return digest_path(Path(path))[0]


_LOADED: dict[tuple[str, str], RealCorpus] = {}


class CorpusError(ValueError):
    """A real-table corpus that cannot be used; the message names the file and why."""


def _read_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The corpus file's arrays, or a CorpusError for a file that is no corpus."""
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in _CORPUS_KEYS if name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as err:
        raise CorpusError(f"prior.real_tables.corpus: {path} is not a corpus written by "
                          f"scripts/build_real_corpus.py ({type(err).__name__}: "
                          f"{str(err)[:80]})") from None
    missing = [name for name in _CORPUS_KEYS if name not in arrays]
    if missing:
        raise CorpusError(f"prior.real_tables.corpus: {path} lacks {missing}")
    return arrays


def _checked(path: str | Path, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Check the arrays' dtypes, shapes and values agree, before anything is planned from
    them (a worker meeting an inconsistency would fail after the manifest is written);
    returns the tables' names."""
    where = f"prior.real_tables.corpus: {path}"
    values, labels, shapes, tables = (arrays[k] for k in ("values", "labels", "shapes", "tables"))
    if values.dtype.kind != "f" or labels.dtype.kind not in "iub" or \
            shapes.dtype.kind not in "iu" or tables.dtype.kind not in "iu":
        raise CorpusError(f"{where}: values must be floats and labels, shapes and tables "
                          "integers")
    if shapes.ndim != 2 or shapes.shape[1:] != (2,) or len(shapes) == 0 or (shapes < 1).any():
        raise CorpusError(f"{where}: shapes must list at least one entry's (rows, columns)")
    # Python integers: a product of shapes in int64 may wrap round and seem to match
    sizes = [(int(rows), int(columns)) for rows, columns in shapes.tolist()]
    if values.ndim != 1 or len(values) != sum(r * c for r, c in sizes) or \
            labels.ndim != 1 or len(labels) != sum(r for r, _ in sizes) or \
            tables.shape != (len(shapes),):
        raise CorpusError(f"{where}: values, labels and tables do not match the entries' shapes")
    try:
        names = json.loads(arrays["names"].tobytes().decode())
    except (UnicodeDecodeError, ValueError):
        raise CorpusError(f"{where}: its names are not JSON") from None
    if not isinstance(names, list) or not all(isinstance(n, dict) for n in names) or \
            tables.min() < 0 or tables.max() >= len(names):
        raise CorpusError(f"{where}: tables must index its list of table names")
    _check_values(where, values, sizes, tables, names)
    if not np.isin(labels, (0, 1)).all():
        raise CorpusError(f"{where}: labels must be 0 or 1")
    _check_entries(where, labels, sizes, tables, names)
    return names


def _table_name(names: list[dict[str, Any]], table: int) -> str:
    return str(names[table].get("table", f"number {table}"))


def _check_values(where: str, values: np.ndarray, sizes: list[tuple[int, int]],
                  tables: np.ndarray, names: list[dict[str, Any]]) -> None:
    """Every value finite once stored as the float32 a task holds: a float64 value beyond
    float32's range passes a check before the cast and becomes ±inf after it."""
    with np.errstate(over="ignore"):
        stored = values.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(stored))
    if bad.size == 0:
        return
    first = int(bad[0])
    starts = np.cumsum([0] + [r * c for r, c in sizes])
    entry = int(np.searchsorted(starts, first, side="right")) - 1
    row, column = divmod(first - int(starts[entry]), sizes[entry][1])
    value = float(values[first])
    what = f"{value!r}, beyond float32's range" if np.isfinite(value) else repr(value)
    table = _table_name(names, int(tables[entry]))
    raise CorpusError(f"{where}: {bad.size} value(s) are not finite as float32 (NaN, ±inf or "
                      f"beyond ±3.4e38), the first in table {table!r} (entry {entry}), row "
                      f"{row}, column {column}: {what}; the corpus builder writes encoded, "
                      "finite tables")


def _check_entries(where: str, labels: np.ndarray, sizes: list[tuple[int, int]],
                   tables: np.ndarray, names: list[dict[str, Any]]) -> None:
    """Every table has an entry to draw, and every entry both classes (a task needs a
    positive and a negative row)."""
    empty = sorted(set(range(len(names))) - set(tables.tolist()))
    if empty:
        raise CorpusError(f"{where}: table {_table_name(names, empty[0])!r} (number "
                          f"{empty[0]}) has no entry; {len(empty)} table(s) lack one")
    starts = np.cumsum([0] + [r for r, _ in sizes])[:-1]
    low, high = np.minimum.reduceat(labels, starts), np.maximum.reduceat(labels, starts)
    single = np.flatnonzero(low == high)
    if single.size:
        entry = int(single[0])
        raise CorpusError(f"{where}: entry {entry} (table "
                          f"{_table_name(names, int(tables[entry]))!r}) holds one class only "
                          f"(every label {int(low[entry])}); a task needs both; "
                          f"{single.size} entr{'y' if single.size == 1 else 'ies'} do so")


def load_corpus(path: str | Path, sha256: str) -> RealCorpus:
    """The corpus at ``path``, checked against ``sha256`` (cached per process, by the path as
    given: every real task asks for it, and resolving the path each time is a file-system
    call on the generator's hot path)."""
    key = (str(path), sha256)
    if key in _LOADED:
        return _LOADED[key]
    if not Path(path).is_file():
        raise CorpusError(
            f"prior.real_tables.corpus: {path} does not exist or is not a file; build it with "
            "`python scripts/build_real_corpus.py --out " + str(path) + "`"
        )
    try:
        found = digest_path(Path(path))[0]
    except OSError as err:
        raise CorpusError(f"prior.real_tables.corpus: cannot read {path}: "
                          f"{err.strerror or err}") from None
    if found != sha256:
        raise CorpusError(f"prior.real_tables.corpus: {path} has SHA-256 {found}, the config "
                          f"names {sha256}")
    arrays = _read_arrays(path)
    names = _checked(path, arrays)
    values, labels = arrays["values"], arrays["labels"].astype(np.int8)
    shapes, tables = arrays["shapes"].astype(np.int64), arrays["tables"].astype(np.int64)
    cells = np.concatenate([[0], np.cumsum(shapes[:, 0] * shapes[:, 1])])
    rows = np.concatenate([[0], np.cumsum(shapes[:, 0])])
    x = tuple(values[cells[e]:cells[e + 1]].reshape(shapes[e]) for e in range(len(shapes)))
    y = tuple(labels[rows[e]:rows[e + 1]] for e in range(len(shapes)))
    entries_of_table = tuple(np.flatnonzero(tables == t) for t in range(len(names)))
    rows_of_value = tuple((np.flatnonzero(z == 0), np.flatnonzero(z == 1)) for z in y)
    corpus = RealCorpus(x=x, y=y, entries_of_table=entries_of_table,
                        rows_of_value=rows_of_value, names=tuple(names))
    _LOADED[key] = corpus
    return corpus


def _scaled_counts(labeled: int, pool_positives: int, pool_negatives: int, n_positive: int,
                   n_negative: int) -> tuple[int, int, int]:
    """(labeled, pool positives, pool negatives) as asked, scaled down together if the entry
    lacks rows of a class."""
    scale = min(1.0, n_positive / (labeled + pool_positives),
                n_negative / max(pool_negatives, 1))
    if scale < 1.0:
        labeled = max(1, int(labeled * scale))
        pool_positives = min(int(pool_positives * scale), n_positive - labeled)
        pool_negatives = int(pool_negatives * scale)
    return labeled, pool_positives, pool_negatives


def _replaced(seed_key: Any, spec: RealTablesConfig) -> np.random.Generator | None:
    """The task's ``real_tables`` stream after its first draw if the task is replaced."""
    rng = task_stream(seed_key, "real_tables")
    return rng if float(rng.random()) < spec.probability else None


def _cut(rng: np.random.Generator, spec: RealTablesConfig, counts: tuple[int, int, int],
         n_features: int, meta: dict[str, Any]) -> Task | None:
    """A task cut from a corpus entry with the asked ``counts`` (labeled, pool positives, pool
    negatives) and at most ``n_features`` columns, drawing from ``rng`` (steps 1-4 above);
    None when the rows left have no varying column or no pool."""
    corpus = load_corpus(spec.corpus, spec.sha256)
    candidates = corpus.entries_of_table[int(rng.integers(len(corpus.entries_of_table)))]
    entry = int(candidates[int(rng.integers(len(candidates)))])
    positive_value = int(rng.random() < 0.5)
    x, z = corpus.x[entry], corpus.y[entry]
    positives = rng.permutation(corpus.rows_of_value[entry][positive_value])
    negatives = rng.permutation(corpus.rows_of_value[entry][1 - positive_value])
    labeled, pool_positives, pool_negatives = _scaled_counts(*counts, positives.size,
                                                             negatives.size)
    pool = np.concatenate([positives[labeled:labeled + pool_positives],
                           negatives[:pool_negatives]])
    rows = np.concatenate([positives[:labeled], pool[rng.permutation(pool.size)]])
    block = x[rows]
    varying = np.flatnonzero(block.max(axis=0) > block.min(axis=0))
    columns = varying[rng.permutation(varying.size)][:n_features]
    if columns.size == 0 or pool.size == 0:
        return None
    y = (z[rows] == positive_value).astype(np.int8)
    n_unlabeled = int(pool.size)
    meta = {
        **meta,
        "real_table": entry,
        "n_rows": int(rows.size),
        "n_features": int(columns.size),
        "n_labeled": labeled,
        "n_unlabeled": n_unlabeled,
        "realized_pi": pool_negatives / n_unlabeled,
        "realized_eta": n_unlabeled / labeled,
    }
    x_task = np.ascontiguousarray(block[:, columns], dtype=np.float32)
    return Task(x=x_task, y=y, n_labeled=labeled, meta=meta)


def real_task(task: Task, spec: RealTablesConfig) -> Task:
    """``task``, or with probability ``spec.probability`` a task cut from the corpus with its
    sizes and class shares."""
    rng = _replaced(task.meta["seed_key"], spec)
    cut = None
    if rng is not None:
        pool_negatives = int(task.n_unlabeled - np.count_nonzero(task.y[task.n_labeled:]))
        counts = (task.n_labeled, task.n_unlabeled - pool_negatives, pool_negatives)
        cut = _cut(rng, spec, counts, task.n_features, task.meta)
    if cut is None:
        task.meta["real_table"] = -1  # the task was built for this call alone
        return task
    return cut


def real_task_instead_of_scm(plan: TaskPlan, spec: RealTablesConfig) -> Task | None:
    """The mechanism's hook before the SCM, under ``spec.skip_scm``: the task cut from the
    corpus for ``plan`` without running its SCM, or None when the task stays synthetic: not
    drawn for replacement, or no varying column left (then its SCM runs, and :func:`real_task`
    draws the same and leaves it synthetic). The sizes are those the synthetic task would have
    under the paper's labeling; the metadata holds the plan's factors, with ``attempts`` and
    ``n_generated`` 0 and no ``label_node``."""
    rng = _replaced(plan.seed_key, spec) if spec.skip_scm else None
    if rng is None:
        return None
    # the paper's labeling: ⌈π·n⌉ of the n generated rows are negatives, less those that
    # leave with the training portion (prior_gen.paper.reference)
    generated_negatives = n_negatives(plan.n_rows, plan.pi)
    pool_negatives = generated_negatives - dropped_negatives(plan, generated_negatives)
    counts = (plan.n_labeled, plan.n_unlabeled - pool_negatives, pool_negatives)
    # the sizes here are the asked ones; _cut writes the realized ones in their places
    meta = plan_meta(plan, plan.n_labeled + plan.n_unlabeled, plan.n_unlabeled, pool_negatives,
                     attempts=0)
    meta["n_generated"] = 0
    return _cut(rng, spec, counts, plan.n_features, meta)
