"""The one place the passes' probabilities leave the model: each member's mean over its passes,
averaged over members, and checked to be finite.

Both paths that score rows end here, the pool's passes (:func:`~puicl_model.passes.inference.
run_passes`, which also scores the class prior's folds and held-out positives) and new rows'
queries (:func:`~puicl_model.passes.query_rows.score_new_rows`). Weights with finite but
extreme values, or a saved classifier's damaged context caches, make logits overflow and
softmax return NaN; read on, NaN would write empty probabilities, label every row 0, report
π̂ nan and let the portfolio choose among NaN held-out AUCs. So no score goes on that is not
finite.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["NonFiniteScoresError", "member_mean"]


class NonFiniteScoresError(ValueError):
    """The model gave some rows a NaN or infinite probability."""


def member_mean(total: Mapping[int, np.ndarray], count: Mapping[int, np.ndarray],
                rows: np.ndarray | slice | None = None, what: str = "rows") -> np.ndarray:
    """Mean over members of each member's mean P(y = +) per row (``total[m]``: the sum of
    member ``m``'s passes' probabilities, ``count[m]``: how many; ``rows``: only those);
    a :class:`NonFiniteScoresError` where any is not finite."""
    wanted = slice(None) if rows is None else rows
    if not total or any((scored[wanted] == 0).any() for scored in count.values()):
        raise RuntimeError(f"internal error: some {what} were not scored by every member")
    # (one member: its own mean, bit for bit)
    mean = np.mean([total[m][wanted] / count[m][wanted] for m in sorted(total)], axis=0)
    bad = int(np.count_nonzero(~np.isfinite(mean)))
    if bad:
        raise NonFiniteScoresError(
            f"the model's P(y=1) is NaN or infinite for {bad} of {len(mean)} {what}: its "
            "weights hold values no trained model has, or a saved classifier's state is "
            "damaged; no scores are given")
    return mean
