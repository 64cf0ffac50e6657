"""What ``puicl predict`` must write, computed in memory: the yardstick of the CLI's batch, dask
and type-reading tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def in_memory_scores_csv(path: Path, weights: Path) -> bytes:
    """What ``puicl predict --input path --label-column s`` must write: the in-memory call on
    the CSV read in one piece, written as the command writes its output."""
    import pandas as pd

    from puicl_model.estimator.classifier import PUICLClassifier

    whole = pd.read_csv(path)
    features, s = whole.drop(columns="s"), whole["s"].to_numpy()
    clf = PUICLClassifier(weights=weights, random_state=0, progress=False)
    proba, labels = clf.fit(features, s).predict_and_proba(features[s == 0])
    return pd.DataFrame({"row": np.flatnonzero(s == 0), "p_positive": proba[:, 1],
                         "label": labels}).to_csv(index=False).encode()
