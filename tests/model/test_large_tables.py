"""``puicl predict`` on files, a batch at a time: Parquet and CSV, scores that do not depend on
the batch size and equal the in-memory classifier's, and nothing half-written on failure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.pool_sample import NEW_ROW, sampled_pool_rows
from puicl_model.files.cli import main


@pytest.fixture
def frame(table, rng) -> pd.DataFrame:
    X, s = table(rng, 25, 400, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["kind"] = pd.Categorical(rng.choice(["x", "y", "z"], len(frame)))
    frame["s"] = s
    return frame.sample(frac=1.0, random_state=0).reset_index(drop=True)  # labeled rows spread


def predict(path, weights, out, *extra: str) -> int:
    return main(["predict", "--input", str(path), "--label-column", "s", "--weights",
                 str(weights), "-o", str(out), "--no-progress", *extra])


def test_parquet_scores_do_not_depend_on_the_batch_and_equal_the_in_memory_path(
        frame, small_weights, tmp_path) -> None:
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=97)
    outputs = []
    for rows in ("7", "150", "100000"):
        out = tmp_path / f"scores_{rows}.parquet"
        assert predict(tmp_path / "t.parquet", small_weights, out, "--batch-rows", rows,
                       "--pool-sample", "120") == 0
        outputs.append(pd.read_parquet(out))
    for other in outputs[1:]:
        pd.testing.assert_frame_equal(other, outputs[0], check_exact=True)
    features, s = frame.drop(columns=["s"]), frame["s"].to_numpy()
    clf = PUICLClassifier(weights=small_weights, pool_sample=120, random_state=0).fit(features, s)
    result = outputs[0]
    np.testing.assert_array_equal(result["row"], np.flatnonzero(s == 0))
    np.testing.assert_array_equal(result["p_positive"],
                                  clf.predict_proba(features[s == 0])[:, 1])
    np.testing.assert_array_equal(result["label"], clf.predict(features[s == 0]))
    assert result.dtypes.tolist() == [np.int64, np.float64, np.int64]


def with_duplicates(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ten of its unlabeled rows repeated further down, labeled and unlabeled."""
    pool = frame.index[frame.s == 0]
    copies = frame.loc[pool[:10]].assign(s=[0] * 8 + [1] * 2)
    return pd.concat([frame, copies], ignore_index=True)


def test_a_duplicated_row_gets_its_own_score_in_any_batch(frame, small_weights,
                                                          tmp_path) -> None:
    table = with_duplicates(frame)
    table.to_parquet(tmp_path / "t.parquet", row_group_size=97)
    chunks = ("--single-pass-limit", "60", "--chunk-size", "40")  # copies in other chunks
    features, s = table.drop(columns=["s"]), table["s"].to_numpy()
    pool = features[s == 0]
    for sample in ("0", "300"):  # the whole pool, and a sample holding copies
        outputs = []
        for rows in ("7", "100000"):
            out = tmp_path / f"scores_{sample}_{rows}.parquet"
            assert predict(tmp_path / "t.parquet", small_weights, out, "--batch-rows", rows,
                           "--pool-sample", sample, *chunks) == 0
            outputs.append(pd.read_parquet(out))
        pd.testing.assert_frame_equal(outputs[1], outputs[0], check_exact=True)
        clf = PUICLClassifier(weights=small_weights, random_state=0, single_pass_limit=60,
                              chunk_size=40, pool_sample=int(sample) or None).fit(features, s)
        if sample == "0":  # the whole pool in one piece: each row its own transductive score
            np.testing.assert_array_equal(outputs[0]["p_positive"],
                                          clf.predict_proba(pool)[:, 1])
            scores = outputs[0].set_index("row")["p_positive"]
            copies = [(a, b) for a, b in zip(pool.index[:8], pool.index[-8:], strict=True)]
            assert any(scores[a] != scores[b] for a, b in copies)  # the test tells them apart
        else:  # a sampled row gets its own score, a row left out of it a new row's
            kept = sampled_pool_rows(len(pool), 300, 0)
            left_out = np.setdiff1d(np.arange(len(pool)), kept)
            expected = np.empty(len(pool))
            expected[kept] = clf.predict_and_proba(
                pool.iloc[kept], pool_rows=np.arange(len(kept)))[0][:, 1]
            expected[left_out] = clf.predict_and_proba(
                pool.iloc[left_out], pool_rows=np.full(len(left_out), NEW_ROW))[0][:, 1]
            np.testing.assert_array_equal(outputs[0]["p_positive"], expected)
            # predict_proba, which matches rows by their values, differs at copies alone: in
            # the sample (it gives the first copy's score), and left out of it (a copy of a
            # sampled row gets that row's score, not a new row's)
            by_value = clf.predict_proba(pool)[:, 1]
            differs = by_value != expected
            assert not (differs & ~pool.duplicated(keep=False).to_numpy()).any()
            assert differs[kept].any() and differs[left_out].any()  # the test tells both


def test_csv_in_batches_reads_a_column_as_one_read_does(small_weights, tmp_path, table,
                                                        rng) -> None:
    X, s = table(rng, 20, 60, 2)
    frame = pd.DataFrame(X, columns=["a", "b"])
    frame["code"] = rng.integers(0, 3, len(frame)).astype(str)
    frame.loc[len(frame) - 3, "code"] = "unknown"  # text only in the last batch
    frame["s"] = s
    frame.to_csv(tmp_path / "t.csv", index=False)
    for rows in ("10", "1000"):
        assert predict(tmp_path / "t.csv", small_weights, tmp_path / f"o{rows}.csv",
                       "--batch-rows", rows) == 0
    small, large = ((tmp_path / f"o{rows}.csv").read_bytes() for rows in ("10", "1000"))
    assert small == large
    whole = pd.read_csv(tmp_path / "t.csv")
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(whole.drop(columns="s"), s)
    expected = clf.predict_proba(whole.drop(columns="s")[s == 0])[:, 1]
    written = pd.read_csv(tmp_path / "o10.csv")
    np.testing.assert_array_equal(written["p_positive"], expected)  # in full precision


def test_two_tables_in_parquet_and_csv_give_the_same_scores(frame, small_weights,
                                                             tmp_path) -> None:
    positives = frame[frame.s == 1].drop(columns="s")
    unlabeled = frame[frame.s == 0].drop(columns="s")
    positives.to_parquet(tmp_path / "p.parquet")
    unlabeled.to_parquet(tmp_path / "u.pq")
    positives.to_csv(tmp_path / "p.csv", index=False)
    unlabeled[["kind", "c", "a", "b"]].to_csv(tmp_path / "u.csv", index=False)  # any order
    for kind, (p, u) in {"parquet": ("p.parquet", "u.pq"), "csv": ("p.csv", "u.csv")}.items():
        assert main(["predict", "--positives", str(tmp_path / p), "--unlabeled",
                     str(tmp_path / u), "--weights", str(small_weights), "--no-progress",
                     "--batch-rows", "64", "-o", str(tmp_path / f"{kind}.parquet")]) == 0
    parquet, csv = (pd.read_parquet(tmp_path / f"{k}.parquet") for k in ("parquet", "csv"))
    np.testing.assert_array_equal(parquet["row"], np.arange(len(unlabeled)))
    pd.testing.assert_frame_equal(parquet, csv, check_exact=True)


def test_a_failure_mid_way_leaves_no_output(frame, small_weights, tmp_path, monkeypatch,
                                            capsys) -> None:
    frame.to_parquet(tmp_path / "t.parquet")
    scored = []

    def fails_on_the_third_batch(self, X, pool_rows=None):
        scored.append(len(X))
        if len(scored) == 3:
            raise OSError(28, "No space left on device")
        return original(self, X, pool_rows)

    original = PUICLClassifier.predict_and_proba
    monkeypatch.setattr(PUICLClassifier, "predict_and_proba", fails_on_the_third_batch)
    out = tmp_path / "out" / "scores.parquet"
    assert predict(tmp_path / "t.parquet", small_weights, out, "--batch-rows", "50") == 2
    assert len(scored) == 3
    assert capsys.readouterr().err.strip().endswith("No space left on device")
    assert not out.exists() and list(out.parent.iterdir()) == []


@pytest.mark.parametrize(("option", "value"), [("--batch-rows", "0"), ("--pool-sample", "-1")])
def test_bad_batch_and_sample_sizes_are_refused(frame, small_weights, tmp_path, capsys, option,
                                                value) -> None:
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(SystemExit) as stop:
        predict(tmp_path / "t.parquet", small_weights, tmp_path / "o.csv", option, value)
    assert stop.value.code == 2
    assert f"{option}: expected " in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_the_pool_is_sampled_once_and_fit_keeps_that_sample(frame, small_weights, tmp_path,
                                                             monkeypatch) -> None:
    from puicl_model.estimator import pool_sample
    from puicl_model.files import large_tables

    draws = []
    original = pool_sample.sampled_pool_rows

    def counted(*args, **kwargs):
        draws.append(args)
        return original(*args, **kwargs)

    for module in (pool_sample, large_tables):  # the driver's draw, and any draw in fit
        monkeypatch.setattr(module, "sampled_pool_rows", counted)
    given = []
    fit = PUICLClassifier.fit

    def recorded(self, X, s, **kwargs):
        given.append((len(X), kwargs))
        return fit(self, X, s, **kwargs)

    monkeypatch.setattr(PUICLClassifier, "fit", recorded)
    frame.to_parquet(tmp_path / "t.parquet")
    assert predict(tmp_path / "t.parquet", small_weights, tmp_path / "o.parquet",
                   "--pool-sample", "120", "--random-state", "7") == 0
    n_pool = int((frame.s == 0).sum())
    assert draws == [(n_pool, 120, 7)]  # once, from the classifier's seed
    assert given == [(25 + 120, {"sampled_from": n_pool})]


def test_an_inverted_table_is_noted_once_with_the_whole_tables_counts(
        small_weights, tmp_path, table, rng, capsys) -> None:
    for n_labeled, n_pool, noted in ((150, 300, False), (320, 300, True)):
        X, s = table(rng, n_labeled, n_pool, 2)  # a sample of 120 of the pool: fewer rows
        pd.DataFrame(X, columns=["a", "b"]).assign(s=s).to_parquet(tmp_path / "t.parquet")
        assert predict(tmp_path / "t.parquet", small_weights, tmp_path / "o.parquet",
                       "--pool-sample", "120") == 0
        notes = [line for line in capsys.readouterr().err.splitlines()
                 if "s marks more rows labeled" in line]
        if noted:  # once, in the table's own counts
            assert len(notes) == 1 and notes[0].startswith("puicl predict: note: ")
            assert f"({n_labeled} rows with s = 1) than unlabeled ({n_pool} with s = 0)" \
                in notes[0]
        else:
            assert notes == []


@pytest.mark.parametrize("seed", [None, np.random.RandomState(0)])
def test_the_driver_refuses_a_seed_it_cannot_draw_the_sample_from(frame, small_weights,
                                                                  tmp_path, seed) -> None:
    from puicl_model.files.large_tables import fit_on_input, open_input

    frame.to_parquet(tmp_path / "t.parquet")
    source = open_input(input_path=tmp_path / "t.parquet", label_column="s")
    clf = PUICLClassifier(weights=small_weights, random_state=seed)
    with pytest.raises(ValueError, match=r"^random_state must be an integer to fit on files "
                                         r"\(the pool's sample is drawn from it before fit\), "
                                         r"got [^\n]+$"):
        fit_on_input(clf, source)
    assert not hasattr(clf, "planner_")
