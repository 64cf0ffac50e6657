"""The logistic learner's fits on scikit-learn's own loss and optimiser, without the Python that
``LogisticRegression.fit`` runs around them.

At the paper's size a fold of the logistic learner trains on about 560 rows of ten columns.
L-BFGS minimises the loss in about 0.5 ms there, but ``fit`` spends about twice as long again
validating its parameters, the rows and the targets and setting up its callbacks, and the learner
fits five folds per table. On a GPU, where the model's passes take a few milliseconds, such
host work is what the default pays above the model alone (docs/performance.md, "The default at
the paper's size").

:func:`fit_logistic` makes the call ``LogisticRegression(C=c, max_iter=max_iter).fit`` makes for
a binary target of finite float64 rows: scikit-learn's ``LinearModelLoss`` over its
``HalfBinomialLoss`` with an intercept, minimised by SciPy's L-BFGS-B from zero weights with
scikit-learn's options, the penalty scaled by the number of rows, one thread. It returns a
``LogisticRegression`` holding exactly the attributes that ``fit`` sets, so a classifier saves and
scores it as before.

Those calls are private to scikit-learn and may change with a release, so nothing is assumed:
:func:`follows_scikit_learn` fits both ways on seeded tables once per process and compares every
attribute, bit for bit. Where they differ, or a call fails, the learner uses ``fit`` itself. The
scores are then the same bytes, only slower. Rows that are not finite or have no column, and
targets not of two classes, go to ``fit`` too, which says what is wrong with them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

__all__ = ["fit_logistic", "follows_scikit_learn", "scikit_learn_fit"]


def scikit_learn_fit(x: np.ndarray, y: np.ndarray, c: float, max_iter: int,
                     ) -> LogisticRegression:
    """scikit-learn's own fit of the same settings."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=max_iter).fit(x, y)


def _direct_fit(x: np.ndarray, y: np.ndarray, c: float, max_iter: int) -> LogisticRegression:
    """The fit as scikit-learn's ``_logistic_regression_path`` makes it for one C, a binary
    target and no sample weights, and the attributes ``LogisticRegression.fit`` sets."""
    from scipy import optimize
    from sklearn._loss.loss import HalfBinomialLoss
    from sklearn.linear_model import LogisticRegression
    from sklearn.linear_model._linear_loss import LinearModelLoss
    from sklearn.linear_model._logistic import _LOGISTIC_SOLVER_CONVERGENCE_MSG
    from sklearn.utils.optimize import _check_optimize_result

    classes = np.unique(y)
    target = np.ones(len(y), dtype=np.float64)
    target[y != classes[1]] = 0.0  # classes[1] is the positive label
    loss = LinearModelLoss(base_loss=HalfBinomialLoss(), fit_intercept=True)
    result = optimize.minimize(
        loss.loss_gradient, np.zeros(x.shape[1] + 1), method="L-BFGS-B", jac=True,
        args=(x, target, None, 1.0 / (c * len(x)), 1),
        options={"maxiter": max_iter, "maxls": 50, "gtol": 1e-4,
                 "ftol": 64 * np.finfo(float).eps})
    n_iter = _check_optimize_result("lbfgs", result, max_iter,
                                    extra_warning_msg=_LOGISTIC_SOLVER_CONVERGENCE_MSG)
    fitted = LogisticRegression(C=c, max_iter=max_iter)
    weights = result.x
    fitted.n_features_in_ = x.shape[1]
    fitted.classes_ = classes
    fitted.n_iter_ = np.asarray([n_iter], dtype=np.int32)
    fitted.coef_ = weights[:-1][None, :]
    fitted.intercept_ = weights[-1:]
    return fitted


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float = 1.0, max_iter: int = 1000,
                 ) -> LogisticRegression:
    """``LogisticRegression(C=c, max_iter=max_iter).fit(x, y)``, bit for bit: directly where
    that is shown to give the same fit with this scikit-learn, else by ``fit`` itself."""
    rows = np.asarray(x)
    target = np.asarray(y)
    # arrays only: a frame's column names would become the fit's feature_names_in_
    direct = (isinstance(x, np.ndarray) and rows.ndim == 2 and rows.shape[1] > 0
              and rows.dtype == np.float64 and rows.flags.c_contiguous and target.ndim == 1
              and len(target) == len(rows) and target.dtype.kind in "iu"
              and np.isfinite(rows).all() and len(np.unique(target)) == 2
              and follows_scikit_learn(c, max_iter))
    return _direct_fit(rows, target, c, max_iter) if direct else scikit_learn_fit(x, y, c,
                                                                                  max_iter)


def _check_tables() -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded tables for :func:`follows_scikit_learn`: (rows, targets). A rare class, one
    column, separable rows (where the penalty alone bounds the weights), labels not 0 and 1."""
    rng = np.random.default_rng(20261128)
    tables = []
    for n_rows, n_columns, share in ((560, 10, 0.3), (90, 1, 0.1), (300, 40, 0.5)):
        x = rng.normal(size=(n_rows, n_columns))
        y = (x[:, 0] + rng.normal(size=n_rows) > np.quantile(x[:, 0], 1 - share))
        tables.append((x, y.astype(np.int64)))
    x = rng.normal(size=(80, 3))
    tables.append((x, np.where(x[:, 1] > 0, 7, 2).astype(np.int64)))  # separable, labels 2, 7
    return tables


def _same_fit(ours: LogisticRegression, theirs: LogisticRegression) -> bool:
    """Whether two fitted regressions hold the same attributes, of the same types and bytes."""
    mine, reference = vars(ours), vars(theirs)
    if mine.keys() != reference.keys():
        return False
    for name, value in reference.items():
        other = mine[name]
        if type(other) is not type(value):
            return False
        if isinstance(value, np.ndarray):
            if (other.dtype, other.shape, other.tobytes()) != (value.dtype, value.shape,
                                                                value.tobytes()):
                return False
        elif other != value:
            return False
    return True


@functools.cache
def follows_scikit_learn(c: float = 1.0, max_iter: int = 1000) -> bool:
    """Whether :func:`fit_logistic`'s direct fit gives ``LogisticRegression``'s, every attribute
    bit for bit, with this scikit-learn (checked once per process on seeded tables, before any
    fit runs on a thread, as the warnings' filters are the process's; any error in the private
    calls counts as no)."""
    import warnings

    try:
        with warnings.catch_warnings():  # the check's own fits may not converge at max_iter
            warnings.simplefilter("ignore")
            return all(_same_fit(_direct_fit(x, y, c, max_iter),
                                 scikit_learn_fit(x, y, c, max_iter))
                       for x, y in _check_tables())
    except Exception:  # a changed private signature: LogisticRegression.fit instead
        return False
