"""Each loader returns the documented shape and class balance; missing files are named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmark.datasets import (
    DATA_DIR_ENV,
    DATASET_SLUGS,
    DataError,
    load_dataset,
    resolve_data_dir,
)

# slug: (rows, features, positives) as documented in the data's own notes and in
# docs/benchmark.md (MONK = train + test; Adult = adult.data; Heart = heart.dat)
EXPECTED = {
    "diabetes": (768, 8, 500),
    "haberman": (306, 3, 225),
    "heart": (270, 13, 150),
    "ilpd": (583, 10, 416),
    "monk1": (556, 6, 278),
    "monk2": (601, 6, 395),
    "monk3": (554, 6, 288),
    "abalone": (4177, 8, 2770),
    "adult": (32561, 14, 24720),
    "banknote": (1372, 4, 762),
    "car": (1728, 6, 1594),
    "default_credit": (30000, 23, 23364),
    "iranian_churn": (3150, 13, 2655),
    "letter": (1549, 16, 813),
    "magic": (19020, 10, 12332),
    "mushroom": (8124, 22, 4208),
    "rice": (3810, 7, 2180),
    "spambase": (4601, 57, 2788),
    "wdbc": (569, 30, 357),
    "wine_quality": (6497, 11, 4113),
}


def _shared_data_dir() -> Path | None:
    try:
        return resolve_data_dir()
    except DataError:
        return None


needs_data = pytest.mark.skipif(_shared_data_dir() is None,
                                reason="no data directory (shared/datasets) present")


def test_expected_table_covers_every_dataset():
    assert tuple(EXPECTED) == DATASET_SLUGS
    assert len(DATASET_SLUGS) == 20


@needs_data
@pytest.mark.parametrize("slug", DATASET_SLUGS)
def test_loader_shape_and_class_balance(slug):
    rows, features, positives = EXPECTED[slug]
    data = load_dataset(slug)
    assert data.X.shape == (rows, features)
    assert data.X.dtype == np.float64 and data.y.dtype == np.int8
    assert int(data.y.sum()) == positives
    assert positives >= rows - positives  # positive = majority class (§6.1)
    assert len(data.categorical) == features == len(data.feature_names)
    # only ILPD has missing numeric values (4 empty A/G ratios); categorical '?' is a code
    assert int(np.isnan(data.X).sum()) == (4 if slug == "ilpd" else 0)


@needs_data
def test_categorical_columns_are_ordinal_codes():
    car = load_dataset("car")
    assert all(car.categorical)
    # natural order: buying low < med < high < vhigh -> codes 0..3
    assert set(np.unique(car.X[:, 0])) == {0.0, 1.0, 2.0, 3.0}
    mushroom = load_dataset("mushroom")
    stalk_root = mushroom.X[:, 10]  # 'a11' = stalk-root, '?' is its own (last) code
    assert np.sum(stalk_root == stalk_root.max()) == 2480


def test_missing_file_names_the_file_and_its_source(tmp_path):
    (tmp_path / "adult").mkdir()
    with pytest.raises(DataError) as info:
        load_dataset("adult", tmp_path)
    message = str(info.value)
    assert str(tmp_path / "adult" / "adult.data") in message
    assert "https://archive.ics.uci.edu/dataset/2/adult" in message
    assert "--data-dir" in message


def test_data_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert resolve_data_dir() == tmp_path
    explicit = tmp_path / "explicit"
    explicit.mkdir()
    assert resolve_data_dir(explicit) == explicit  # --data-dir wins over the variable


def test_explicit_data_dir_must_exist(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        resolve_data_dir(tmp_path / "nope")


def test_file_whose_majority_is_wrong_is_rejected(tmp_path):
    (tmp_path / "haberman").mkdir()
    # 1 = survived must be the majority; write a file where it is not
    rows = ["30,64,1,2", "31,60,2,2", "40,61,0,1"]
    (tmp_path / "haberman" / "haberman.data").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match="not the majority"):
        load_dataset("haberman", tmp_path)


def test_unknown_dataset():
    with pytest.raises(DataError, match="unknown dataset 'iris'"):
        load_dataset("iris")
