"""Tables as users bring them: the second yardstick of the classifier's decisions, generated.

The development suite (docs/dev_suite.md) holds real tables, but few of them are wide with many
uninformative columns, few mix text categories, product codes, dates, flags and identifiers, and
none was labeled as a user labels a pool. This generator writes such tables, each one keyed by
its spec alone (the same bytes on every machine):

* **shape**: ``mixed`` (an identifier, skewed amounts with missing values, whole numbers, a text
  category, a product code of a few hundred values, a flag, a date, plain numbers, uninformative
  columns of every kind), ``wide`` (50 to 200 numeric columns of which 8 to 20 carry the signal,
  a few with missing values) or ``numeric`` (a dozen numbers, some skewed);
* **signal**: ``linear``, ``threshold`` (steps of single columns), ``interaction`` (two or three
  pairs of columns as products or XOR-like sign pairs, beside a weak linear part) or ``mix``
  (the three summed), on latent columns that the observed
  ones encode (an amount is the exponential of one, a category the bins of another, a date the
  quantiles of a third, a product code a group of a fourth);
* **positives** 20 % to 50 % of the rows; **labeled** a count (200, 300) or a share (10 % to
  30 %) of the positives, drawn at random among them (SCAR);
* **rows** from 700 to 200,000.

A task is ``(X, s, y)``: a pandas DataFrame as a user's table is read, the labeled mask (1 =
labeled positive, 0 = unlabeled) and the hidden labels. Two lists of specs: :func:`decision_specs`,
what decisions read, and :func:`unseen_specs`, drawn under other keys from the same design and
read only to check a decision made without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SHAPES = ("mixed", "wide", "numeric")
SIGNALS = ("linear", "threshold", "interaction", "mix")
# the spawn-key tags of the two lists' draws (a spec's own draws are keyed by its fields)
DECISION_KEY, UNSEEN_KEY = 0, 1
REGIONS = ["north", "south", "east", "west", "centre", "coast", "mountain", "islands"]
PLANS = ["basic", "plus", "pro", "family", "student"]


@dataclass(frozen=True)
class TableSpec:
    """One generated table: every draw is keyed by these fields."""

    shape: str
    signal: str
    rows: int
    positive_share: float  # of all rows
    labeled: float  # >= 1: a count of labeled positives; < 1: the share of positives labeled
    separation: float  # the logit's scale: the larger, the better the classes separate
    columns: int  # wide: all columns; mixed and numeric: the plain numeric columns
    informative: int  # the latent columns the signal reads
    seed: int

    @property
    def name(self) -> str:
        labeled = (f"{int(self.labeled)}lab" if self.labeled >= 1
                   else f"{round(100 * self.labeled)}pct")
        return (f"{self.shape}-{self.signal}-{self.rows}r-{labeled}-"
                f"p{round(100 * self.positive_share)}-s{self.seed}")

    @property
    def cell(self) -> str:
        """The size cell a task is reported in: its rows and how its positives are labeled."""
        rows = "large" if self.rows >= 10_000 else "medium" if self.rows >= 2_000 else "small"
        labeled = "count" if self.labeled >= 1 else "share"
        return f"{rows}:{labeled}"

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {self.shape!r}")
        if self.signal not in SIGNALS:
            raise ValueError(f"signal must be one of {SIGNALS}, got {self.signal!r}")
        if not 0.05 <= self.positive_share <= 0.95:
            raise ValueError(f"positive_share must be in [0.05, 0.95], got {self.positive_share}")
        if self.rows < 100 or self.informative < 2 or self.columns < 1:
            raise ValueError(f"too small a table: {self}")


def _rng(spec: TableSpec, part: int) -> np.random.Generator:
    """The generator of one part of a table's draws, keyed by every field of its spec."""
    key = [SHAPES.index(spec.shape), SIGNALS.index(spec.signal), spec.rows,
           round(spec.positive_share * 1e6), round(spec.labeled * 1e6),
           round(spec.separation * 1e6), spec.columns, spec.informative, spec.seed, part]
    return np.random.default_rng(np.random.SeedSequence(20261127, spawn_key=tuple(key)))


# ------------------------------------------------------------------------------- signal
def _signal(kind: str, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A score of the latent columns ``z`` of the kind asked, standardized."""
    k = z.shape[1]
    if kind == "linear":
        score = z @ rng.normal(size=k)
    elif kind == "threshold":
        cuts = rng.uniform(-1.0, 1.0, size=k)
        steps = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 1.5, size=k)
        score = (z > cuts).astype(np.float64) @ steps
    elif kind == "interaction":
        # two or three pairs of columns that act together, beside a weak linear part
        score = 0.3 * (z @ rng.normal(size=k)) / np.sqrt(k)
        order = rng.permutation(k)
        for a, b in list(zip(order[0::2], order[1::2], strict=False))[: rng.integers(2, 4)]:
            if rng.random() < 0.5:
                score = score + rng.uniform(0.5, 1.5) * z[:, a] * z[:, b]
            else:  # an XOR of two signs: neither column says anything alone
                score = score + rng.uniform(0.5, 1.5) * np.sign(z[:, a]) * np.sign(z[:, b])
    else:  # mix
        score = sum(_signal(part, z, rng) for part in ("linear", "threshold", "interaction"))
    score = np.asarray(score, dtype=np.float64)
    return (score - score.mean()) / (score.std() or 1.0)


def _labels(spec: TableSpec, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y, s): the hidden labels drawn from the signal at the spec's positive share, and the
    labeled positives drawn at random among the positives (SCAR)."""
    rng = _rng(spec, 1)
    logit = spec.separation * _signal(spec.signal, z, rng)
    # the bias that gives the spec's share of positives in expectation (bisection)
    low, high = -30.0, 30.0
    for _ in range(80):
        middle = (low + high) / 2
        share = float(np.mean(1.0 / (1.0 + np.exp(-(logit + middle)))))
        low, high = (middle, high) if share < spec.positive_share else (low, middle)
    y = (rng.random(len(logit)) < 1.0 / (1.0 + np.exp(-(logit + low)))).astype(np.int64)
    positives = np.flatnonzero(y == 1)
    wanted = (int(spec.labeled) if spec.labeled >= 1
              else round(spec.labeled * len(positives)))
    count = min(max(wanted, 20), len(positives) - 10)
    s = np.zeros(len(y), dtype=np.int64)
    s[rng.choice(positives, size=count, replace=False)] = 1
    return y, s


# ------------------------------------------------------------------------------ columns
def _codes(values: np.ndarray, names: Sequence[str], rng: np.random.Generator) -> np.ndarray:
    """A latent column cut into as many quantile bins as ``names``, named in a random order."""
    bins = np.quantile(values, np.linspace(0, 1, len(names) + 1)[1:-1])
    order = rng.permutation(len(names))
    return np.asarray(names, dtype=object)[order[np.searchsorted(bins, values)]]


def _missing(values: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).copy()
    values[rng.random(len(values)) < share] = np.nan
    return values


def _mixed(spec: TableSpec, z: np.ndarray, rng: np.random.Generator):
    """A customer table: each informative latent column behind a column of its own kind."""
    import pandas as pd

    n = spec.rows
    frame = pd.DataFrame({"customer_id": [f"C{index:08d}" for index in rng.permutation(n)]})
    frame["amount"] = _missing(np.round(np.exp(2.5 + 0.9 * z[:, 0]), 2), 0.10, rng)
    frame["age"] = np.clip(np.round(42 + 13 * z[:, 1]), 18, 95).astype(np.int64)
    frame["region"] = _codes(z[:, 2], REGIONS, rng)
    quantile = (np.argsort(np.argsort(z[:, 3])) + 0.5) / n
    frame["signup"] = (pd.Timestamp("2021-01-01")
                       + pd.to_timedelta(np.floor(quantile * 3 * 365), unit="D"))
    group = np.searchsorted(np.quantile(z[:, 4], np.linspace(0, 1, 13)[1:-1]), z[:, 4])
    frame["product"] = [f"P-{g:02d}{i:02d}" for g, i in zip(group, rng.integers(0, 30, n),
                                                           strict=True)]
    frame["newsletter"] = z[:, 5] > 0.3
    for j in range(6, z.shape[1]):
        frame[f"x{j}"] = _missing(z[:, j] + 0.3 * rng.normal(size=n), 0.05, rng)
    # uninformative columns of every kind
    for j in range(spec.columns):
        frame[f"noise{j}"] = _missing(rng.normal(size=n) * rng.uniform(0.5, 20), 0.03, rng)
    frame["plan"] = np.asarray(PLANS, dtype=object)[rng.integers(0, len(PLANS), n)]
    frame["visits"] = rng.poisson(3.0, n)
    frame["mobile"] = rng.random(n) < 0.6
    return frame


def _wide(spec: TableSpec, z: np.ndarray, rng: np.random.Generator):
    import pandas as pd

    n, k = z.shape
    noise = rng.normal(size=(n, spec.columns - k))
    # some uninformative columns skewed or whole numbers, as measurements are
    skewed = rng.random(spec.columns - k) < 0.3
    noise[:, skewed] = np.exp(noise[:, skewed])
    counts = rng.random(spec.columns - k) < 0.15
    noise[:, counts] = np.round(np.abs(noise[:, counts]) * 5)
    informative = z + 0.2 * rng.normal(size=z.shape)
    table = np.concatenate([informative, noise], axis=1)
    order = rng.permutation(spec.columns)
    table = table[:, order]
    for j in rng.choice(spec.columns, size=max(1, spec.columns // 20), replace=False):
        table[:, j] = _missing(table[:, j], 0.05, rng)
    return pd.DataFrame(table, columns=[f"f{j:03d}" for j in range(spec.columns)])


def _numeric(spec: TableSpec, z: np.ndarray, rng: np.random.Generator):
    import pandas as pd

    n, k = z.shape
    columns = {}
    for j in range(k):
        values = z[:, j] + 0.2 * rng.normal(size=n)
        columns[f"m{j}"] = np.exp(values) if j % 3 == 0 else values
    for j in range(spec.columns):
        columns[f"u{j}"] = rng.normal(size=n)
    frame = pd.DataFrame(columns)
    frame["m1"] = _missing(frame["m1"].to_numpy(), 0.08, rng)
    return frame


def make_table(spec: TableSpec):
    """(X, s, y) of ``spec``: the table, the labeled mask and the hidden labels."""
    z = _rng(spec, 0).normal(size=(spec.rows, spec.informative))
    y, s = _labels(spec, z)
    build = {"mixed": _mixed, "wide": _wide, "numeric": _numeric}[spec.shape]
    return build(spec, z, _rng(spec, 2)), s, y


# -------------------------------------------------------------------------------- lists
# the size cells: (rows, labeled) — the paper's protocol's small table (200 labeled positives
# and a pool of 500), a medium table with a share of its positives labeled, large tables with few
# and with many labeled positives (mixed tables are the largest: 20,000 rows)
SIZES = ((700, 200.0), (3_000, 0.3), (10_000, 300.0), (10_000, 0.3))


def _positive_share(rows: int, labeled: float, rng: np.random.Generator) -> float:
    """The share of positives: 20 % to 50 %, or for the paper's small table what gives its pool
    of 500 a negative share of 20 % to 70 % (the paper's protocol holds 20 %)."""
    if rows <= 1_000 and labeled >= 1:
        pool = rows - labeled
        return float(round((labeled + pool * (1 - rng.uniform(0.2, 0.7))) / rows, 2))
    return float(round(rng.uniform(0.2, 0.5), 2))


def _specs(key: int, repetitions: int) -> list[TableSpec]:
    rng = np.random.default_rng(np.random.SeedSequence(20261127, spawn_key=(key,)))
    specs = []
    for _ in range(repetitions):
        for shape in SHAPES:
            for signal in SIGNALS:
                for rows, labeled in SIZES:
                    if rows >= 10_000 and shape == "mixed":
                        rows = 20_000
                    if labeled < 1:  # a share of the positives
                        labeled = float(round(rng.uniform(0.1, 0.3), 2))
                    columns = {"wide": int(rng.integers(50, 201)),
                               "mixed": int(rng.integers(2, 8)),
                               "numeric": int(rng.integers(2, 8))}[shape]
                    informative = (int(rng.integers(8, 21)) if shape == "wide"
                                   else 10 if shape == "mixed" else int(rng.integers(4, 9)))
                    specs.append(TableSpec(
                        shape, signal, rows, _positive_share(rows, labeled, rng), labeled,
                        float(round(rng.uniform(2.0, 8.0), 2)), columns, informative,
                        seed=int(rng.integers(0, 2**31))))
    return specs


def decision_specs(repetitions: int = 1) -> list[TableSpec]:
    """The tables decisions read: every shape, signal and size cell, ``repetitions`` draws
    of each (48 tables a repetition)."""
    return _specs(DECISION_KEY, repetitions)


def unseen_specs(repetitions: int = 1) -> list[TableSpec]:
    """Tables of the same design under another key: read only to check a decision."""
    return _specs(UNSEEN_KEY, repetitions)


def large_specs() -> list[TableSpec]:
    """The largest tables, 200,000 rows with 30 % of their positives labeled: few, costly."""
    return [TableSpec("mixed", "mix", 200_000, 0.4, 0.3, 3.0, 4, 10, seed=7),
            TableSpec("wide", "interaction", 200_000, 0.35, 0.3, 3.0, 120, 12, seed=8)]


def spec_from_name(name: str, specs: Sequence[TableSpec] | None = None) -> TableSpec:
    """The spec of a table's name, among ``specs`` (default: every list)."""
    pool = (list(specs) if specs is not None
            else decision_specs(3) + unseen_specs(3) + large_specs())
    for spec in pool:
        if spec.name == name:
            return spec
    raise KeyError(f"no generated table is named {name!r}")
