"""No NaN leaves the model: scores that are not finite stop the caller in one line, and a NaN
held-out AUC never wins the portfolio's choice (puicl_model.passes.scores)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from puicl_model.estimator.classifier import PUICLClassifier
from puicl_model.estimator.portfolio import MEMBERS, Evidence, choose
from puicl_model.passes.scores import NonFiniteScoresError


def _huge(model_factory):
    """Finite weights no trained model holds (an EMA scaled by 1e30): the logits overflow."""
    model = model_factory()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1e30)
    return model


def test_non_finite_pool_scores_stop_the_fit_in_one_line(model_factory, table, rng) -> None:
    from sklearn.exceptions import NotFittedError

    X, s = table(rng, 20, 60, 3)
    classifier = PUICLClassifier(weights=_huge(model_factory), device="cpu", portfolio="none")
    with pytest.raises(NonFiniteScoresError) as refused:
        classifier.fit(X, s)  # fit scores the pool
    assert "NaN or infinite for 60 of 60 rows" in str(refused.value)
    assert "\n" not in str(refused.value)
    # and leaves no classifier that looks fitted
    for call in (classifier.predict_proba, classifier.predict):
        with pytest.raises(NotFittedError):
            call(X[s == 0])
    with pytest.raises(NotFittedError):
        classifier.estimate_class_prior()


def test_non_finite_new_row_scores_stop_scoring(model_factory, small_model, table,
                                                rng) -> None:
    X, s = table(rng, 20, 60, 3)
    classifier = PUICLClassifier(weights=small_model, device="cpu", portfolio="none",
                                 context_cache_bytes=0).fit(X, s)
    classifier.predict_proba(X[:2])  # the pool is scored by the healthy model
    classifier.model_ = _huge(model_factory)  # then the contexts of new rows are not finite
    with pytest.raises(NonFiniteScoresError, match="of 5 new rows"):
        classifier.predict_proba(X[:5] + 100.0)


def test_a_nan_held_out_auc_never_wins_the_choice(rng) -> None:
    def scores(n: int) -> dict[str, np.ndarray]:
        return {member: rng.normal(size=n) for member in MEMBERS}

    held, pool = scores(40), scores(200)
    held["model"][:] = np.nan  # the model's scores of the held-out positives
    with pytest.raises(NonFiniteScoresError, match="held-out AUC of model, "):
        choose(Evidence([held], [pool]), MEMBERS)


def test_puicl_predict_stops_on_non_finite_scores_in_one_line(model_factory, tmp_path,
                                                              monkeypatch, capsys) -> None:
    """Scores that leave the model NaN end the command, status 2, with no file written (they
    wrote empty probabilities, labelled every row 0 and printed π̂ nan, status 0)."""
    import pandas as pd

    from puicl_model.estimator import classifier as classifier_module
    from puicl_model.files.cli import main

    huge = _huge(model_factory)
    monkeypatch.setattr(classifier_module, "load_model", lambda weights, device: huge)
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"x": rng.normal(size=60), "y": rng.normal(size=60),
                          "s": np.r_[np.ones(20, dtype=int), np.zeros(40, dtype=int)]})
    table.to_csv(tmp_path / "t.csv", index=False)
    out, prior = tmp_path / "o.csv", tmp_path / "prior.json"
    assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                 "--portfolio", "none", "-o", str(out), "--prior-json", str(prior)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: the model's P(y=1) is NaN or infinite for ")
    assert error.count("\n") == 1 and not out.exists() and not prior.exists()
