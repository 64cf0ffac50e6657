"""PUICLClassifier: the transductive contract, new rows, π̂, ensembles, chunking, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import puicl_model.passes.inference
from puicl_model import PUICLClassifier
from puicl_model.estimator.classifier import NoBundledWeightsError
from puicl_model.net.batch import collate_tasks
from puicl_model.passes import query_rows


def direct_proba(model, x_labeled: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
    """P(y=1) of the rows ``x_rest`` in one forward pass of [labeled; rest], computed as the
    classifier computes it."""
    x = np.vstack([x_labeled, x_rest]).astype(np.float32)
    with torch.no_grad():
        logits = puicl_model.passes.inference.inference_logits(
            model, collate_tasks([x], [len(x_labeled)]))
    return torch.softmax(logits, -1)[0, len(x_labeled):, 1].numpy().astype(np.float64)


class ForwardLog:
    """Records the task sizes of every forward pass the classifier runs through ``model``
    (the classifier calls ``puicl_model.passes.inference.inference_logits``)."""

    def __init__(self, model: torch.nn.Module | None, monkeypatch: pytest.MonkeyPatch) -> None:
        """``model`` None: every model's forwards (a fit's, which loads its model), until
        :meth:`stop`."""
        self.calls: list[list[tuple[int, int, int]]] = []
        self.contexts: list[int] = []  # rows before the query rows, per task
        self.recording = True
        original = puicl_model.passes.inference.inference_logits

        def recording(called: torch.nn.Module, batch):
            if called is model or (model is None and self.recording):
                self.calls.append(batch.sizes())
                self.contexts.extend(batch.context_sizes())
            return original(called, batch)

        monkeypatch.setattr(puicl_model.passes.inference, "inference_logits", recording)

    def stop(self) -> None:
        self.recording = False

    @property
    def tasks(self) -> list[tuple[int, int, int]]:
        return [task for call in self.calls for task in call]


def test_fitted_unlabeled_rows_get_the_one_pass_transductive_prediction(
    small_weights, table, rng, monkeypatch
) -> None:
    X, s = table(rng, 30, 50, 6)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=0,
                          numeric="standard").fit(X, s)
    log.stop()
    assert log.tasks == [(30, 80, 6)]  # fit: exactly one forward pass over the whole table
    fitted_log = ForwardLog(clf.model_, monkeypatch)
    proba = clf.predict_proba(X[s == 0])
    assert proba.shape == (50, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert fitted_log.calls == []  # predicting the pool reads what fit kept
    expected = direct_proba(clf.model_, clf.x_labeled_, clf.x_pool_)
    raw = direct_proba(clf.model_, X[s == 1], X[s == 0])
    np.testing.assert_array_equal(proba[:, 1], expected)
    # the classifier's float64 centring/scaling does not change what the model computes
    np.testing.assert_allclose(proba[:, 1], raw, rtol=0, atol=1e-5)
    # cached: later calls, also on shuffled or partial pools, run no further pass
    order = rng.permutation(50)
    np.testing.assert_array_equal(clf.predict_proba(X[s == 0][order])[:, 1], expected[order])
    np.testing.assert_array_equal(clf.predict_proba(X[s == 0][:3])[:, 1], expected[:3])
    assert len(log.calls) == 1 and len(fitted_log.calls) == 2  # (direct_proba's two)
    assert list(clf.classes_) == [0, 1]


def test_new_rows_are_query_rows_next_to_the_fitted_pool(
    small_weights, table, rng, monkeypatch
) -> None:
    X, s = table(rng, 30, 40, 5)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    log.stop()
    x_new = rng.normal(size=(15, 5))
    proba = clf.predict_proba(x_new)[:, 1]
    # the pool's transductive pass; the new rows are query rows over its cached context
    # (puicl_model.passes.query_rows), not another forward pass of the whole task
    assert log.tasks == [(30, 70, 5)]
    table_new = clf.preprocessor_.transform(x_new)
    one = np.vstack([clf.x_labeled_, clf.x_pool_, table_new[4:5]]).astype(np.float32)
    with torch.no_grad():
        logits = clf.model_(collate_tasks([one], [30], n_context=[70]))
    assert proba[4] == pytest.approx(torch.softmax(logits, -1)[0, 70, 1].item(), abs=1e-6)
    # a new row's prediction depends neither on the other rows passed nor on their order,
    # to the last bit
    mixed = np.vstack([x_new[7:8], X[s == 0][:2], x_new[::-1]])
    mixed_proba = clf.predict_proba(mixed)[:, 1]
    assert mixed_proba[0] == proba[7]
    np.testing.assert_array_equal(mixed_proba[3:], proba[::-1])
    # known rows keep their transductive prediction
    np.testing.assert_array_equal(mixed_proba[1:3], clf.predict_proba(X[s == 0])[:2, 1])


def test_class_prior_and_thresholds(small_weights, table, rng) -> None:
    X, s = table(rng, 30, 61, 4)
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    p = clf.predict_proba(X[s == 0])[:, 1]
    pi_hat = clf.estimate_class_prior()
    assert pi_hat >= np.mean(1 - p) and 0 < pi_hat < 1  # at least the mean (test_class_prior)
    np.testing.assert_array_equal(clf.predict(X[s == 0]), (p > 0.5).astype(int))
    for numpy_cut in (np.float32(0.5), np.float64(0.5)):  # numpy's numbers are numbers
        as_numpy = clone(clf).set_params(threshold=numpy_cut).fit(X, s)
        np.testing.assert_array_equal(as_numpy.predict(X[s == 0]), (p > 0.5).astype(int))
    scores = clf.decision_function(X[s == 0])
    np.testing.assert_allclose(scores, np.log(p / (1 - p)), rtol=1e-9)
    assert ((scores > 0) == (p > 0.5)).all()

    prior = clone(clf).set_params(threshold="prior").fit(X, s)
    labels = prior.predict(X[s == 0])
    assert (labels == 0).sum() == round(pi_hat * 61)
    assert p[labels == 0].max() <= p[labels == 1].min()  # the lowest P(y=1) are negative
    new = rng.normal(size=(6, 4)) + 1.0
    new_p = prior.predict_proba(new)[:, 1]
    _, cut = prior.fitted_.prior_cut(prior._runtime())
    np.testing.assert_array_equal(prior.predict(new), (new_p > cut).astype(int))


def test_pandas_table_with_categorical_missing_and_constant_columns(small_weights, rng) -> None:
    n = 80
    frame = pd.DataFrame(
        {
            "size": rng.normal(size=n),
            "weight": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
            "colour": rng.choice(["red", "green", "blue"], size=n).astype(object),
            "grade": pd.Categorical(rng.choice(["A", "B"], size=n)),
            "ok": rng.random(n) < 0.5,
            "always": np.full(n, 3.0),
        }
    )
    frame.loc[rng.choice(n, 5, replace=False), "colour"] = None
    s = pd.Series((np.arange(n) < 25).astype(int))
    clf = PUICLClassifier(weights=small_weights).fit(frame, s)
    assert clf.preprocessor_.dropped_features_ == ["always"]
    assert clf.x_pool_.shape == (55, 7)  # size, weight, colour one-hot (3), grade, ok
    assert list(clf.feature_names_in_) == list(frame.columns) and clf.n_features_in_ == 6
    proba = clf.predict_proba(frame[s == 0])
    assert np.isfinite(proba).all()
    # a frame with the columns in another order is the same table
    shuffled = frame[s == 0][list(reversed(frame.columns))]
    np.testing.assert_array_equal(clf.predict_proba(shuffled), proba)


def test_more_features_than_trained_are_an_ensemble_over_feature_groups(
    small_weights, table, rng, monkeypatch
) -> None:
    X, s = table(rng, 20, 30, 45)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, random_state=3).fit(X, s)
    log.stop()
    planner = clf.planner_
    assert planner.n_feature_groups == 3 and planner.random_choices
    groups = [planner.features_of(k) for k in range(3)]
    assert sorted(np.concatenate(groups).tolist()) == list(range(45))  # a partition
    assert [len(g) for g in groups] == [15, 15, 15]
    proba = clf.predict_proba(X[s == 0])[:, 1]
    assert sorted(log.tasks) == [(20, 50, 15)] * 3
    expected = np.mean(
        [direct_proba(clf.model_, clf.x_labeled_[:, g], clf.x_pool_[:, g]) for g in groups], axis=0
    )
    np.testing.assert_allclose(proba, expected, rtol=0, atol=1e-6)
    # the partition is drawn from random_state
    other = PUICLClassifier(weights=small_weights, random_state=4).fit(X, s).planner_
    assert not all(np.array_equal(a, other.features_of(k)) for k, a in enumerate(groups))


def test_large_pool_is_chunked_with_bounded_passes(
    small_weights, table, rng, monkeypatch
) -> None:
    X, s = table(rng, 12, 100, 3)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, single_pass_limit=99, chunk_size=16,
                          large_pool="chunks", random_state=1).fit(X, s)
    log.stop()
    planner = clf.planner_
    chunks = planner.chunks_of(0)
    assert len(chunks) == 7 and max(len(c) for c in chunks) <= 16
    assert sorted(np.concatenate(chunks).tolist()) == list(range(100))
    proba = clf.predict_proba(X[s == 0])[:, 1]
    # each pass: chunk_size // 2 = 8 of the 12 labeled rows (η = 2) and one chunk
    assert [(labeled, rows - labeled) for labeled, rows, _ in log.tasks] == [
        (8, len(c)) for c in chunks
    ]
    for index, chunk in enumerate(chunks):  # each chunk equals its own direct forward pass
        labeled = clf.x_labeled_[planner.labeled_of(0, index)]
        expected = direct_proba(clf.model_, labeled, clf.x_pool_[chunk])
        np.testing.assert_allclose(proba[chunk], expected, rtol=0, atol=1e-6)
    assert len({tuple(planner.labeled_of(0, i)) for i in range(7)}) > 1  # bagging
    # new rows join one chunk each, scored next to that chunk's context (its 8 labeled rows
    # and at most 16 pool rows) in blocks of a fixed size: bounded as well
    contexts: list[tuple[int, int]] = []
    blocks: list[int] = []
    context_cache, query_logits = query_rows.context_cache, query_rows._query_logits

    def logged_context(model, x, n_labeled):
        contexts.append((n_labeled, x.shape[0]))
        return context_cache(model, x, n_labeled)

    def logged_block(model, cache, x):
        blocks.append(x.shape[0])
        return query_logits(model, cache, x)

    monkeypatch.setattr(query_rows, "context_cache", logged_context)
    monkeypatch.setattr(query_rows, "_query_logits", logged_block)
    clf.predict_proba(rng.normal(size=(70, 3)))
    assert 1 <= len(contexts) <= 7 and all(n == 8 and 8 < rows <= 8 + 16 for n, rows in contexts)
    assert set(blocks) == {query_rows.QUERY_BLOCK_ROWS} and len(blocks) == len(contexts)
    # one row more than the limit, not less, is what switches chunking on
    single = PUICLClassifier(weights=small_weights, single_pass_limit=100).fit(X, s)
    assert not single.planner_.chunked and not single.planner_.random_choices


def test_many_labeled_positives_are_subsampled_per_pass(
    small_weights, table, rng, monkeypatch
) -> None:
    X, s = table(rng, 40, 20, 3)
    log = ForwardLog(None, monkeypatch)
    clf = PUICLClassifier(weights=small_weights, max_labeled=10, n_estimators=4).fit(X, s)
    log.stop()
    assert log.tasks == [(10, 30, 3)] * 4
    subsets = {tuple(planner.labeled_of(0, 0)) for planner in clf.planners_}  # one per member
    assert len(subsets) == 4


def test_random_state_makes_results_reproducible(small_weights, table, rng) -> None:
    X, s = table(rng, 12, 60, 25)

    def run(seed):
        return PUICLClassifier(weights=small_weights, single_pass_limit=30, chunk_size=20,
                               random_state=seed).fit(X, s).predict_proba(X[s == 0])[:, 1]

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.array_equal(run(7), run(8))


def test_model_object_as_weights_and_sklearn_clone(small_model, table, rng) -> None:
    X, s = table(rng, 10, 20, 3)
    clf = PUICLClassifier(weights=small_model, device="auto", random_state=0)
    assert clf.get_params()["random_state"] == 0
    first = clf.fit(X, s).predict_proba(X[s == 0])
    assert clf.device_.type == "cpu"
    np.testing.assert_array_equal(clone(clf).fit(X, s).predict_proba(X[s == 0]), first)


def test_without_a_bundled_checkpoint_it_says_so(monkeypatch) -> None:
    import puicl_model.net.weights as weights_module

    monkeypatch.setattr(weights_module, "bundled_weights_path", lambda: None)
    clf = PUICLClassifier()  # the constructor only stores its arguments; fit says it
    with pytest.raises(NoBundledWeightsError, match="bundled checkpoint is missing") as caught:
        clf.fit(np.arange(8.0).reshape(4, 2), [1, 1, 0, 0])
    assert "weights=PATH" in str(caught.value)


def test_bundled_model_separates_a_real_pu_task() -> None:
    """The shipped weights, loaded with no arguments, rank a real PU pool far above chance
    (breast cancer, benign = positive, a third of the positives labeled). Guards against a
    corrupt or mis-exported checkpoint and against a broken default inference path."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import roc_auc_score

    data = load_breast_cancer()
    y = (data.target == 1).astype(int)
    positives = np.random.default_rng(0).permutation(np.flatnonzero(y == 1))
    s = np.zeros(len(y), dtype=int)
    s[positives[: len(positives) // 3]] = 1
    clf = PUICLClassifier(random_state=0).fit(data.data, s)
    p = clf.predict_proba(data.data[s == 0])[:, 1]
    assert roc_auc_score(y[s == 0], p) > 0.9
    assert abs(clf.estimate_class_prior() - np.mean(y[s == 0] == 0)) < 0.15


@pytest.mark.parametrize(
    ("s", "message"),
    [
        (np.r_[np.ones(3), np.zeros(6), 2], r"s must contain only 0 \(unlabeled\) and 1 "
                                            r"\(labeled positive\); found 2\.0"),
        (np.r_[np.ones(1), np.zeros(9)], r"at least two labeled positives \(s == 1\); got 1"),
        (np.ones(10), r"no unlabeled rows \(s == 0\)"),
        (np.r_[np.ones(3), np.zeros(6)], "X has 10 rows but s has 9 entries"),
        (np.r_[np.ones(3), np.zeros(6), np.nan], "s must contain only 0"),
        (scipy.sparse.csr_matrix(np.r_[np.ones(3), np.zeros(7)].reshape(-1, 1)),
         r"^s is a scipy sparse csr_matrix of shape \(10, 1\); pass the labels as a dense "
         r"1-D array \(s\.toarray\(\)\.ravel\(\)\)$"),
        (scipy.sparse.coo_array(np.r_[np.ones(3), np.zeros(7)].reshape(1, -1)),
         r"^s is a scipy sparse coo_array of shape \(1, 10\)"),
        (1, r"^s must be a 1-D array of 0/1 labels, one per row of X, got a single int$"),
    ],
)
def test_bad_labels_are_rejected_with_clear_messages(small_weights, s, message) -> None:
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match=message):
        PUICLClassifier(weights=small_weights).fit(X, s)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_estimators": 0}, "n_estimators: must be an integer >= 1, got 0"),
        ({"chunk_size": 3}, "chunk_size: must be an integer >= 4, got 3"),
        ({"threshold": 1.5}, r"threshold must be a number in \(0, 1\) or 'prior', got 1\.5"),
        ({"precision": "half"}, "precision must be 'auto', 'float32' or 'bfloat16'"),
        ({"device": "tpu"}, "device must be 'auto'"),
        ({"missing": "zero"}, "missing must be 'median', 'median\\+indicator' or 'error'"),
    ],
)
def test_bad_settings_are_rejected_at_fit(small_weights, params, message) -> None:
    X, s = np.random.default_rng(0).normal(size=(10, 3)), np.r_[np.ones(3), np.zeros(7)]
    with pytest.raises(ValueError, match=message):
        PUICLClassifier(weights=small_weights, **params).fit(X, s)


def test_bad_tables_are_rejected_with_clear_messages(small_weights) -> None:
    X, s = np.random.default_rng(0).normal(size=(10, 3)), np.r_[np.ones(3), np.zeros(7)]
    clf = PUICLClassifier(weights=small_weights)
    with pytest.raises(NotFittedError, match="call fit"):
        clf.predict(X)
    bad = X.copy()
    bad[4, 1] = np.inf
    with pytest.raises(ValueError, match=r"column '1' holds an infinite value \(row 4\)"):
        clf.fit(bad, s)
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"column '1' has 1 missing values \(NaN\)"):
        PUICLClassifier(weights=small_weights, missing="error").fit(bad, s)
    assert np.isfinite(clf.fit(bad, s).predict_proba(bad)).all()  # NaN imputed by default
    with pytest.raises(ValueError, match="X has 2 features, but PUICLClassifier is expecting 3"):
        clf.predict(X[:, :2])


def test_precision_threads_and_progress_options(small_weights, table, rng, capsys) -> None:
    X, s = table(rng, 20, 40, 4)
    exact = PUICLClassifier(weights=small_weights).fit(X, s).predict_proba(X[s == 0])[:, 1]
    threads = torch.get_num_threads()
    low = PUICLClassifier(weights=small_weights, precision="bfloat16", n_threads=1,
                          progress=True).fit(X, s)
    low_p = low.predict_proba(X[s == 0])[:, 1]
    assert torch.get_num_threads() == threads  # restored after inference
    assert np.abs(low_p - exact).max() < 0.05 and not np.array_equal(low_p, exact)
    assert "PUICL" in capsys.readouterr().err  # the tqdm bar
    cut = float(np.median(exact))
    labels = PUICLClassifier(weights=small_weights, threshold=cut).fit(X, s).predict(X[s == 0])
    np.testing.assert_array_equal(labels, (exact > cut).astype(int))
    assert labels.sum() == 20  # half of the 40 pool rows lie above their median


@pytest.mark.parametrize("count", [0, -1, 2.5, "3", True, 1025, 100_000, 10**9, 2**31])
def test_a_thread_count_out_of_bounds_is_refused_at_fit_and_at_use(small_weights, count
                                                                   ) -> None:
    # far too many threads kill the process in OpenMP (a signal, no Python error); a count
    # torch cannot take fails deep inside it: each is one line, before any thread starts
    X, s = np.random.default_rng(0).normal(size=(30, 3)), np.r_[np.ones(10), np.zeros(20)]
    message = r"^n_threads must be a whole number from 1 to 1024, or None, got "
    with pytest.raises(ValueError, match=message):
        PUICLClassifier(weights=small_weights, n_threads=count).fit(X, s)
    fitted = PUICLClassifier(weights=small_weights, portfolio="none").fit(X, s)
    before = fitted.predict_proba(X)
    threads = torch.get_num_threads()
    fitted.set_params(n_threads=count)  # documented as settable after fit: checked at use
    with pytest.raises(ValueError, match=message):
        fitted.predict_proba(X)
    assert torch.get_num_threads() == threads
    fitted.set_params(n_threads=2)
    assert fitted.predict_proba(X).tobytes() == before.tobytes()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("context_cache_bytes", "abc", r"^context_cache_bytes must be an integer >= 0, got 'abc'"),
    ("context_cache_bytes", -5, r"^context_cache_bytes must be an integer >= 0, got -5"),
    ("threshold", 7, r"^threshold must be a number in \(0, 1\) or 'prior', got 7"),
    ("precision", "half", r"^precision must be 'auto', 'float32' or 'bfloat16', got 'half'"),
])
def test_a_setting_changed_after_fit_is_checked_where_it_is_read(small_weights, name, value,
                                                                 message) -> None:
    X, s = np.random.default_rng(0).normal(size=(30, 3)), np.r_[np.ones(10), np.zeros(20)]
    fitted = PUICLClassifier(weights=small_weights, portfolio="none").fit(X, s)
    fitted.set_params(**{name: value})
    with pytest.raises(ValueError, match=message):
        fitted.predict(X + 0.5)  # new rows: scored by the model, then labeled
