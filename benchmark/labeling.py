"""Which positives of a benchmark task are labeled (``puicl-bench --labeling``).

The paper's protocol (§6.1) labels a uniform random third of the drawn positives: SCAR, the
labeled positives are "selected completely at random". Real labels rarely are: the positives
that get noticed, diagnosed or reported are a biased sample (SAR, "selected at random" given
the features; Bekker, Robberechts & Davis, arXiv 1809.03207). The PU-Bench benchmark scores
methods under such labelings too. Each mechanism here gives every candidate positive a
propensity e(x) > 0; the protocol's number of labeled positives stays ``P_total // 3`` and only
WHICH positives are labeled changes: they are drawn without replacement with probabilities
∝ e(x) (numpy's weighted ``choice``).

* ``sar-linear``: e(x) = σ(SLOPE · z(x)), where z is the projection of the standardized
  features onto a random direction w ~ N(0, I), itself standardized over the candidates:
  positives on one side of a random hyperplane are labeled more often (at SLOPE = 2, a
  positive one standard deviation up is ≈ 7 times as likely to be drawn first as one down).
* ``sar-top``: e(x) = q(x)^TOP_POWER, q = (rank − ½) / m the rank quantile of one random
  numeric feature among the m candidates (ties share their mean rank): the positives with
  the highest values of that feature are labeled more often.
* ``sar-posterior``: e(x) = p(x)^POSTERIOR_POWER, p the class posterior of a logistic
  regression fitted on the whole table with its true labels: the positives that look most
  typical of their class are labeled more often, the ambiguous ones stay unlabeled (PU-Bench's
  "LBE-A"-style labeling, with our own fit and exponent).

Features are standardized by column over the rows used (candidates, or the table for the
posterior); a missing value is the column mean (0 after standardizing); categorical columns
enter as their ordinal codes, as the baselines see them. The random direction or column comes
from the task's labeling stream (``benchmark.protocol.labeling_seed_sequence``), never from
the stream of the SCAR draws, so the rows, the pool and its order are drawn as before.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np

from benchmark.datasets import Dataset

__all__ = ["LABELINGS", "SCAR", "choose_labeled", "parse_labeling", "propensity"]

SCAR = "scar"
LABELINGS = (SCAR, "sar-linear", "sar-top", "sar-posterior")
SLOPE = 2.0
TOP_POWER = 3.0
POSTERIOR_POWER = 4.0
# a propensity below this share of the largest one counts as this share: the weighted draw
# needs as many positive weights as it draws (a posterior can underflow to 0)
_FLOOR = 1e-12


def parse_labeling(value: str) -> str:
    """The --labeling value, or a one-line ValueError naming the known mechanisms."""
    name = value.strip()
    if name not in LABELINGS:
        raise ValueError(f"--labeling: unknown mechanism {name!r} (known: {', '.join(LABELINGS)})")
    return name


def _standardized(values: np.ndarray) -> np.ndarray:
    """Columns of ``values`` to mean 0 and std 1 over the rows (constant columns 0); NaN → 0."""
    with warnings.catch_warnings():  # an all-NaN column: its mean is NaN, then 0 below
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        std = np.nanstd(values, axis=0)
    std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
    return np.nan_to_num((values - mean) / std, nan=0.0)


def _linear(features: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    direction = rng.standard_normal(features.shape[1])
    projection = _standardized(_standardized(features) @ direction[:, None])[:, 0]
    return 1.0 / (1.0 + np.exp(-SLOPE * projection))


def _top(features: np.ndarray, categorical: tuple[bool, ...], rng: np.random.Generator):
    varying = [j for j in range(features.shape[1])
               if np.unique(features[~np.isnan(features[:, j]), j]).size > 1]
    numeric = [j for j in varying if not categorical[j]]
    columns = numeric or varying
    if not columns:  # every column constant over the candidates: no feature to rank by
        return np.ones(features.shape[0])
    column = features[:, columns[int(rng.integers(len(columns)))]]
    column = np.where(np.isnan(column), np.nanmean(column), column)
    from scipy.stats import rankdata

    quantile = (rankdata(column) - 0.5) / column.shape[0]
    return quantile**TOP_POWER


def _table_posterior(dataset: Dataset) -> np.ndarray:
    """P(y = 1 | x) of every row of the table by a logistic regression fitted on all of them;
    the last table's is kept, since a run makes all repetitions of a table in a row."""
    digest = hashlib.sha256(np.ascontiguousarray(dataset.X).tobytes())
    digest.update(np.ascontiguousarray(dataset.y).tobytes())
    key = digest.hexdigest()
    if key not in _POSTERIORS:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        features = _standardized(dataset.X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = LogisticRegression(max_iter=1000).fit(features, dataset.y)
        _POSTERIORS.clear()
        _POSTERIORS[key] = model.predict_proba(features)[:, list(model.classes_).index(1)]
    return _POSTERIORS[key]


_POSTERIORS: dict[str, np.ndarray] = {}


def propensity(labeling: str, dataset: Dataset, candidates: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """float64 propensities > 0 of the ``candidates`` (row indices of positives of
    ``dataset``) under a SAR mechanism (see the module docstring)."""
    if labeling == "sar-linear":
        weights = _linear(dataset.X[candidates], rng)
    elif labeling == "sar-top":
        weights = _top(dataset.X[candidates], dataset.categorical, rng)
    elif labeling == "sar-posterior":
        weights = _table_posterior(dataset)[candidates] ** POSTERIOR_POWER
    else:
        raise ValueError(f"no propensity for labeling {labeling!r}")
    return np.maximum(weights, _FLOOR * weights.max())


def choose_labeled(labeling: str, dataset: Dataset, candidates: np.ndarray, n_labeled: int,
                   rng: np.random.Generator) -> np.ndarray:
    """``candidates`` reordered: the ``n_labeled`` drawn ∝ propensity first (in draw order),
    then the others in their given order."""
    weights = propensity(labeling, dataset, candidates, rng)
    drawn = rng.choice(candidates.shape[0], size=n_labeled, replace=False,
                       p=weights / weights.sum())
    rest = np.ones(candidates.shape[0], bool)
    rest[drawn] = False
    return np.concatenate([candidates[drawn], candidates[rest]])
