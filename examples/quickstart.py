"""Score a real PU task with a PUICL checkpoint and print AUC and the estimated class prior.

scikit-learn's breast-cancer table becomes a PU task the way the benchmark builds one (paper
§6.1): the majority class (benign, 357 rows) is positive; a third of the positives is labeled
(s = 1) and the rest join the negatives in the unlabeled pool (s = 0). One call to ``fit``
stores the task; ``predict_proba`` is one forward pass of the pretrained transformer.

    python examples/quickstart.py                       # the bundled checkpoint
    python examples/quickstart.py --weights runs/smoke/weights --name "smoke model"
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import accuracy_score, roc_auc_score

from puicl_model import PUICLClassifier
from puicl_model.estimator.prior_report import ThresholdWarning


def breast_cancer_pu_task(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return X, s (1 = labeled positive) and the hidden labels y (1 = positive)."""
    data = load_breast_cancer()
    x, y = data.data, (data.target == 1).astype(int)  # target 1 = benign, the majority class
    rng = np.random.default_rng(seed)
    positives = rng.permutation(np.flatnonzero(y == 1))
    s = np.zeros(len(y), dtype=int)
    s[positives[: len(positives) // 3]] = 1
    return x, s, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=None, help="checkpoint (default: the bundled one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default=None,
                        help="the model's name, said on the result's line (default: the bundled "
                        "model, or the --weights path)")
    args = parser.parse_args()
    name = args.name or (args.weights if args.weights else "the bundled model")

    x, s, y = breast_cancer_pu_task(args.seed)
    unlabeled = s == 0
    clf = PUICLClassifier(weights=args.weights, random_state=args.seed).fit(x, s)
    p_positive = clf.predict_proba(x[unlabeled])[:, 1]
    # predict says in one line (a ThresholdWarning) where the data cannot place the share its
    # 0.5 cut labels positive: printed here as a line of the output, other warnings as they are
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = clf.predict(x[unlabeled])
    notes = [str(w.message) for w in caught if w.category is ThresholdWarning]
    for other in (w for w in caught if w.category is not ThresholdWarning):
        warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
    true_pi = float(np.mean(y[unlabeled] == 0))
    print(f"breast cancer as PU: {int(s.sum())} labeled positives, {int(unlabeled.sum())} "
          f"unlabeled rows, {x.shape[1]} features")
    for note in notes:
        print(note)
    print(f"{name}: AUC {roc_auc_score(y[unlabeled], p_positive):.3f}   "
          f"accuracy {accuracy_score(y[unlabeled], labels):.3f}   "
          f"pi_hat {clf.estimate_class_prior():.3f} (true negative share {true_pi:.3f})")


if __name__ == "__main__":
    main()
