"""PU task construction of paper §6.1, and the seed keys of the benchmark.

From a binary dataset whose positive class (label 1) is the majority class:

1. draw ``P_total = min(max_positives, #positives)`` positives without replacement;
2. the first ``n_labeled = P_total // 3`` of them (1 : 2 split) are the labeled positives, the
   other ``n_u⁺ = P_total − n_labeled`` go to the unlabeled pool (with a label frequency c,
   ``n_labeled = round(c · P_total)`` instead, and step 3 adds every negative of the table:
   real PU data is often labeled far more sparsely than a third);
3. add ``n_u⁻ = min(#negatives, round(n_u⁺ · π / (1 − π)))`` negatives to the pool, i.e. as
   many as needed for a negative share π (paper: 0.5) where the dataset has enough, else all
   of them (the realized π is then lower and is recorded);
4. shuffle the pool. The task's rows are the labeled positives first, then the pool
   (docs/architecture.md §3), with ``s = 1`` on labeled rows and the hidden ``y_true``.

Under a biased labeling (``labeling`` other than ``scar``, ``benchmark/labeling.py``), step 2
labels ``n_labeled`` of the drawn positives chosen with probabilities ∝ their propensity
instead of the first ones; every other draw is the same.

Every draw comes from ``numpy.random.SeedSequence`` keyed by what is drawn:
``(root_seed, dataset key, repetition)`` for the task and
``(root_seed, dataset key, repetition, method key)`` for a method's own randomness, and
``(root_seed, dataset key, repetition, key("labeling"), mechanism key)`` for a biased
labeling's, so a task is the same bytes whatever the worker count or the order in which tasks
run, and a SCAR task is the same bytes as before biased labelings existed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from benchmark.datasets import Dataset
from benchmark.labeling import SCAR, choose_labeled

MAX_POSITIVES = 600
TARGET_PI = 0.5
# ``max_positives`` that caps nothing: the task draws every positive of the table
# (``puicl-bench --max-positives all``)
EVERY_ROW = 2**31 - 1


def parse_max_positives(text: str) -> int:
    """``--max-positives``: a whole number of at least 3 (one labeled row and two in the pool),
    or ``all`` for every positive of the table."""
    word = str(text).strip()
    if word.lower() == "all":
        return EVERY_ROW
    try:
        value = int(word)
    except ValueError:
        raise ValueError(f"--max-positives must be a whole number >= 3 or 'all', got "
                         f"{word[:40]!r}") from None
    if not 3 <= value <= EVERY_ROW:
        raise ValueError(f"--max-positives must be from 3 to {EVERY_ROW} or 'all', got {value}")
    return value


def size_words(max_positives: int) -> str:
    """How a cap reads in reports: ``600``, ``3,000`` or ``every``."""
    return "every" if max_positives >= EVERY_ROW else f"{max_positives:,}"


def name_key(name: str) -> int:
    """A stable 32-bit integer for a name (dataset slug, method name) used in seed keys."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")


def task_seed_sequence(root_seed: int, dataset: str, repetition: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([root_seed, name_key(dataset), repetition])


def labeling_seed_sequence(root_seed: int, dataset: str, repetition: int,
                           labeling: str) -> np.random.SeedSequence:
    """The stream of a biased labeling's draws (its random direction or column, which
    positives are labeled); apart from the task's own, so SCAR draws are untouched."""
    return np.random.SeedSequence(
        [root_seed, name_key(dataset), repetition, name_key("labeling"), name_key(labeling)]
    )


def method_seed(root_seed: int, dataset: str, repetition: int, method: str) -> int:
    """The integer seed handed to ``method.fit_predict`` for one replicate."""
    seq = np.random.SeedSequence([root_seed, name_key(dataset), repetition, name_key(method)])
    return int(seq.generate_state(1, dtype=np.uint32)[0])


@dataclass(frozen=True)
class PUTask:
    """One PU task: labeled positives first, then the unlabeled pool."""

    dataset: str
    repetition: int
    X: np.ndarray  # float64 [n_labeled + n_unlabeled, d]
    s: np.ndarray  # int8, 1 on labeled rows
    y_true: np.ndarray  # int8, hidden labels (1 on every labeled row)
    categorical: tuple[bool, ...]

    @property
    def n_labeled(self) -> int:
        return int(self.s.sum())

    @property
    def y_unlabeled(self) -> np.ndarray:
        return self.y_true[self.s == 0]

    @property
    def n_u_pos(self) -> int:
        return int(self.y_unlabeled.sum())

    @property
    def n_u_neg(self) -> int:
        return int((self.y_unlabeled == 0).sum())

    @property
    def pi(self) -> float:
        """Realized negative share of the unlabeled pool."""
        return self.n_u_neg / (self.n_u_pos + self.n_u_neg)

    def fingerprint(self) -> str:
        """sha256 of the task's bytes: the runner's cache refuses results of another task."""
        digest = hashlib.sha256()
        for array in (self.X, self.s, self.y_true):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def parse_label_frequency(text: str) -> float:
    """``--label-frequency``: the share c of the drawn positives that is labeled, in (0, 1)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"--label-frequency must be a number in (0, 1), got "
                         f"{str(text)[:40]!r}") from None
    if not 0.0 < value < 1.0:
        raise ValueError(f"--label-frequency must be in (0, 1), got {value:g}")
    return value


def composition(
    n_positive: int,
    n_negative: int,
    max_positives: int = MAX_POSITIVES,
    target_pi: float = TARGET_PI,
    label_frequency: float | None = None,
) -> tuple[int, int, int]:
    """(n_labeled, n_u⁺, n_u⁻) of the task built from a dataset with these class counts.

    ``label_frequency`` c (None: the paper's third): a share c of the drawn positives is
    labeled (at least one) and every negative of the table joins the pool, so the pool's
    negative share is the table's own and ``target_pi`` is not used."""
    if not 0.0 <= target_pi < 1.0:
        raise ValueError(f"target_pi must be in [0, 1), got {target_pi}")
    p_total = min(max_positives, n_positive)
    if label_frequency is None:
        n_labeled = p_total // 3
        n_u_pos = p_total - n_labeled
        wanted_neg = round(n_u_pos * target_pi / (1.0 - target_pi))
        n_u_neg = min(n_negative, wanted_neg)
    else:
        if not 0.0 < label_frequency < 1.0:
            raise ValueError(f"label_frequency must be in (0, 1), got {label_frequency}")
        n_labeled = min(p_total - 1, max(1, round(label_frequency * p_total)))
        n_u_pos = p_total - n_labeled
        n_u_neg = n_negative
    if n_labeled < 1 or n_u_pos + n_u_neg < 1:
        raise ValueError(
            f"too few rows for a PU task: {n_positive} positives and {n_negative} negatives"
        )
    return n_labeled, n_u_pos, n_u_neg


def make_task(
    dataset: Dataset,
    repetition: int,
    root_seed: int,
    max_positives: int = MAX_POSITIVES,
    target_pi: float = TARGET_PI,
    labeling: str = SCAR,
    label_frequency: float | None = None,
) -> PUTask:
    """Build replicate ``repetition`` of the PU task of ``dataset`` (§6.1); ``labeling``: which
    positives are labeled (``benchmark/labeling.py``; ``scar``: the paper's uniform draw);
    ``label_frequency``: the share of the drawn positives labeled, every other drawn row and
    every negative in the pool (:func:`composition`; None: the paper's third and
    ``target_pi``)."""
    n_labeled, n_u_pos, n_u_neg = composition(
        dataset.n_positive, dataset.n_negative, max_positives, target_pi, label_frequency
    )
    rng = np.random.default_rng(task_seed_sequence(root_seed, dataset.slug, repetition))
    positives = np.flatnonzero(dataset.y == 1)
    negatives = np.flatnonzero(dataset.y == 0)
    chosen_pos = rng.choice(positives, size=n_labeled + n_u_pos, replace=False)
    chosen_neg = rng.choice(negatives, size=n_u_neg, replace=False)
    if labeling != SCAR:
        biased = np.random.default_rng(
            labeling_seed_sequence(root_seed, dataset.slug, repetition, labeling))
        chosen_pos = choose_labeled(labeling, dataset, chosen_pos, n_labeled, biased)
    labeled = chosen_pos[:n_labeled]
    pool = rng.permutation(np.concatenate([chosen_pos[n_labeled:], chosen_neg]))
    rows = np.concatenate([labeled, pool])
    s = np.zeros(len(rows), dtype=np.int8)
    s[:n_labeled] = 1
    return PUTask(
        dataset=dataset.slug,
        repetition=repetition,
        X=np.ascontiguousarray(dataset.X[rows]),
        s=s,
        y_true=dataset.y[rows].astype(np.int8),
        categorical=dataset.categorical,
    )
