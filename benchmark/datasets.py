"""Loaders for the 20 binary UCI datasets of the paper's Table 1, read from the raw UCI files.

Every loader returns a :class:`Dataset`: ``X`` float64 ``[n, d]`` (numeric columns as they
are, NaN where a numeric value is missing; categorical columns ordinal-encoded), ``y`` int8
``[n]`` with 1 = the positive class of the paper's protocol (the majority class after
binarization, §6.1) and a mask of which columns are categorical. Per-method preprocessing
(imputation, scaling, one-hot) is the method's job.

Where the paper does not say which file or preprocessing it used, the choices are ours and
are listed in ``docs/benchmark.md`` ("Datasets and the choices the paper leaves open"):

* Heart = Statlog ``heart.dat`` (= OpenML heart-statlog), not Cleveland.
* MONK-1/2/3 = train + test concatenated (= the OpenML versions, 556/601/554 rows).
* Adult = ``adult.data`` only (the file the reference evaluator reads), all 14 features.
* A missing categorical value (``?``) is a category of its own; a missing numeric value is NaN.
* Categories are coded in their natural order where the attribute is ordered (car), else in
  sorted order of their spelling, so the codes do not depend on row order.

The data directory is found from ``--data-dir``, then the environment variable
``PUICL_DATA_DIR``, then a ``shared/datasets`` directory next to the repository (the
project's data checkout) when it exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

DATA_DIR_ENV = "PUICL_DATA_DIR"
_REPO_ROOT = Path(__file__).resolve().parent.parent


class DataError(RuntimeError):
    """A dataset file is missing or does not have the documented content."""


@dataclass(frozen=True)
class Dataset:
    """One binary dataset, positive class = 1."""

    slug: str
    name: str
    X: np.ndarray  # float64 [n, d]
    y: np.ndarray  # int8 [n], 1 = positive (majority) class
    feature_names: tuple[str, ...]
    categorical: tuple[bool, ...]  # per column: ordinal-coded categorical?
    positive_label: str  # the original class value(s) mapped to 1

    @property
    def n_positive(self) -> int:
        return int(self.y.sum())

    @property
    def n_negative(self) -> int:
        return int(len(self.y) - self.y.sum())


@dataclass(frozen=True)
class DatasetSpec:
    """What a loader reads and where its files come from (for error messages)."""

    slug: str
    name: str  # as in the paper's Table 1
    files: tuple[str, ...]  # paths relative to the data directory
    source: str  # UCI page the files come from
    loader: Callable[[Path], Dataset]


# ---------------------------------------------------------------------------- helpers


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The data directory: explicit argument, then $PUICL_DATA_DIR, then the project's
    ``shared/datasets`` next to the repository."""
    if data_dir is not None:
        path = Path(data_dir)
    elif os.environ.get(DATA_DIR_ENV):
        path = Path(os.environ[DATA_DIR_ENV])
    else:
        path = _REPO_ROOT.parent / "shared" / "datasets"
        if not path.is_dir():
            raise DataError(
                "no data directory: pass --data-dir DIR or set "
                f"{DATA_DIR_ENV}=DIR (DIR holds one folder per dataset: see docs/benchmark.md)"
            )
    if not path.is_dir():
        raise DataError(f"data directory {path} does not exist (from --data-dir/{DATA_DIR_ENV})")
    return path


def _ordinal(values: pd.Series, order: Sequence[str] | None = None) -> np.ndarray:
    """Ordinal codes of a categorical column; missing ('?' / NaN) is a category of its own."""
    text = values.astype(str).str.strip().replace({"nan": "?"})
    levels = list(order) if order is not None else sorted(set(text) - {"?"})
    if "?" in set(text):
        levels.append("?")
    unknown = set(text) - set(levels)
    if unknown:
        raise DataError(f"column {values.name!r} has unexpected values {sorted(unknown)[:5]}")
    mapping = {level: code for code, level in enumerate(levels)}
    return text.map(mapping).to_numpy(dtype=np.float64)


def _frame_to_dataset(
    spec_slug: str,
    frame: pd.DataFrame,
    target: np.ndarray,
    categorical: Sequence[str] = (),
    orders: dict[str, Sequence[str]] | None = None,
    positive_label: str = "",
) -> Dataset:
    orders = orders or {}
    columns = []
    for name in frame.columns:
        if name in categorical:
            columns.append(_ordinal(frame[name], orders.get(name)))
        else:
            columns.append(pd.to_numeric(frame[name], errors="raise").to_numpy(np.float64))
    X = np.column_stack(columns).astype(np.float64)
    return Dataset(
        slug=spec_slug,
        name=SPECS[spec_slug].name,
        X=X,
        y=np.asarray(target, dtype=np.int8),
        feature_names=tuple(str(c) for c in frame.columns),
        categorical=tuple(c in categorical for c in frame.columns),
        positive_label=positive_label,
    )


def _read_csv(path: Path, **kwargs) -> pd.DataFrame:
    return pd.read_csv(path, **kwargs)


# ---------------------------------------------------------------------------- loaders


def _load_diabetes(d: Path) -> Dataset:
    df = _read_csv(d / "diabetes/pima-indians-diabetes.data", header=None)
    names = ["pregnancies", "glucose", "blood_pressure", "skin", "insulin", "bmi", "pedigree",
             "age"]
    frame = df.iloc[:, :8].set_axis(names, axis=1)
    return _frame_to_dataset("diabetes", frame, df[8].to_numpy() == 0, positive_label="0")


def _load_haberman(d: Path) -> Dataset:
    df = _read_csv(d / "haberman/haberman.data", header=None)
    frame = df.iloc[:, :3].set_axis(["age", "year", "nodes"], axis=1)
    return _frame_to_dataset("haberman", frame, df[3].to_numpy() == 1, positive_label="1")


def _load_heart(d: Path) -> Dataset:
    df = _read_csv(d / "heart/heart.dat", header=None, sep=r"\s+")
    names = ["age", "sex", "chest_pain", "rest_bp", "chol", "fbs", "rest_ecg", "max_hr",
             "angina", "oldpeak", "slope", "vessels", "thal"]
    frame = df.iloc[:, :13].set_axis(names, axis=1)
    # Nominal codes are kept as the file's numbers (already ordinal codes).
    cat = ("sex", "chest_pain", "fbs", "rest_ecg", "angina", "thal")
    ds = _frame_to_dataset("heart", frame, df[13].to_numpy() == 1, positive_label="1 (absence)")
    return replace(ds, categorical=tuple(n in cat for n in names))


def _load_ilpd(d: Path) -> Dataset:
    df = _read_csv(d / "ilpd/Indian Liver Patient Dataset (ILPD).csv", header=None)
    names = ["age", "gender", "tb", "db", "alkphos", "sgpt", "sgot", "tp", "alb", "ag_ratio"]
    frame = df.iloc[:, :10].set_axis(names, axis=1)
    return _frame_to_dataset(
        "ilpd", frame, df[10].to_numpy() == 1, categorical=("gender",), positive_label="1"
    )


def _monk_loader(number: int, positive: int) -> Callable[[Path], Dataset]:
    def load(d: Path) -> Dataset:
        parts = [
            _read_csv(d / f"monk{number}/monks-{number}.{split}", header=None, sep=r"\s+")
            for split in ("train", "test")
        ]
        df = pd.concat(parts, ignore_index=True)
        frame = df.iloc[:, 1:7].set_axis([f"a{i}" for i in range(1, 7)], axis=1)
        cat = tuple(frame.columns)
        # Attribute values are small integers already: keep them as codes.
        ds = _frame_to_dataset(
            f"monk{number}", frame, df[0].to_numpy() == positive, positive_label=str(positive)
        )
        return replace(ds, categorical=tuple(True for _ in cat))

    return load


def _load_abalone(d: Path) -> Dataset:
    df = _read_csv(d / "abalone/abalone.data", header=None)
    names = ["sex", "length", "diameter", "height", "whole", "shucked", "viscera", "shell"]
    frame = df.iloc[:, :8].set_axis(names, axis=1)
    return _frame_to_dataset(
        "abalone", frame, df[8].to_numpy() >= 9, categorical=("sex",), positive_label="Rings>=9"
    )


_ADULT_NAMES = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
                "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
                "hours_per_week", "native_country"]
_ADULT_CAT = ("workclass", "education", "marital_status", "occupation", "relationship", "race",
              "sex", "native_country")


def _load_adult(d: Path) -> Dataset:
    df = _read_csv(d / "adult/adult.data", header=None, skipinitialspace=True)
    df = df.dropna(how="all")
    frame = df.iloc[:, :14].set_axis(_ADULT_NAMES, axis=1)
    target = df[14].astype(str).str.strip().str.rstrip(".").to_numpy() == "<=50K"
    return _frame_to_dataset("adult", frame, target, categorical=_ADULT_CAT,
                             positive_label="<=50K")


def _load_banknote(d: Path) -> Dataset:
    df = _read_csv(d / "banknote/data_banknote_authentication.txt", header=None)
    frame = df.iloc[:, :4].set_axis(["variance", "skewness", "curtosis", "entropy"], axis=1)
    return _frame_to_dataset("banknote", frame, df[4].to_numpy() == 0, positive_label="0")


_CAR_ORDERS = {
    "buying": ["low", "med", "high", "vhigh"],
    "maint": ["low", "med", "high", "vhigh"],
    "doors": ["2", "3", "4", "5more"],
    "persons": ["2", "4", "more"],
    "lug_boot": ["small", "med", "big"],
    "safety": ["low", "med", "high"],
}


def _load_car(d: Path) -> Dataset:
    df = _read_csv(d / "car/car.data", header=None, dtype=str)
    frame = df.iloc[:, :6].set_axis(list(_CAR_ORDERS), axis=1)
    target = df[6].isin(["unacc", "acc"]).to_numpy()
    return _frame_to_dataset("car", frame, target, categorical=tuple(_CAR_ORDERS),
                             orders=_CAR_ORDERS, positive_label="unacc or acc")


def _load_default_credit(d: Path) -> Dataset:
    # Excel export: UTF-8 BOM, CR-only line endings, two header rows (the second has names).
    path = d / "default_credit/default of credit card clients.csv"
    text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    from io import StringIO

    df = pd.read_csv(StringIO(text), header=1)
    target_col = "default payment next month"
    frame = df.drop(columns=["ID", target_col])
    return _frame_to_dataset("default_credit", frame, df[target_col].to_numpy() == 0,
                             positive_label="0 (no default)")


def _load_iranian_churn(d: Path) -> Dataset:
    df = _read_csv(d / "iranian_churn/Customer Churn.csv")
    frame = df.drop(columns=["Churn"])
    return _frame_to_dataset("iranian_churn", frame, df["Churn"].to_numpy() == 0,
                             categorical=("Complains", "Status"), positive_label="0")


def _load_letter(d: Path) -> Dataset:
    df = _read_csv(d / "letter/letter-recognition.data", header=None)
    df = df[df[0].isin(["C", "U"])].reset_index(drop=True)
    frame = df.iloc[:, 1:17].set_axis([f"f{i}" for i in range(1, 17)], axis=1)
    return _frame_to_dataset("letter", frame, df[0].to_numpy() == "U", positive_label="U")


def _load_magic(d: Path) -> Dataset:
    df = _read_csv(d / "magic/magic04.data", header=None)
    names = ["length", "width", "size", "conc", "conc1", "asym", "m3long", "m3trans", "alpha",
             "dist"]
    frame = df.iloc[:, :10].set_axis(names, axis=1)
    return _frame_to_dataset("magic", frame, df[10].to_numpy() == "g", positive_label="g")


def _load_mushroom(d: Path) -> Dataset:
    df = _read_csv(d / "mushroom/agaricus-lepiota.data", header=None, dtype=str)
    frame = df.iloc[:, 1:].set_axis([f"a{i}" for i in range(1, 23)], axis=1)
    return _frame_to_dataset("mushroom", frame, df[0].to_numpy() == "e",
                             categorical=tuple(frame.columns), positive_label="e (edible)")


def _load_rice(d: Path) -> Dataset:
    path = d / "rice/Rice_Cammeo_Osmancik.arff"
    names: list[str] = []
    rows: list[list[str]] = []
    in_data = False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("%"):
            continue
        if in_data:
            rows.append([v.strip() for v in line.split(",")])
        elif line.upper().startswith("@ATTRIBUTE"):
            names.append(line.split()[1])
        elif line.upper().startswith("@DATA"):
            in_data = True
    df = pd.DataFrame(rows, columns=names)
    frame = df.drop(columns=["Class"])
    return _frame_to_dataset("rice", frame, df["Class"].to_numpy() == "Osmancik",
                             positive_label="Osmancik")


def _load_spambase(d: Path) -> Dataset:
    df = _read_csv(d / "spambase/spambase.data", header=None)
    frame = df.iloc[:, :57].set_axis([f"f{i}" for i in range(57)], axis=1)
    return _frame_to_dataset("spambase", frame, df[57].to_numpy() == 0, positive_label="0")


def _load_wdbc(d: Path) -> Dataset:
    df = _read_csv(d / "wdbc/wdbc.data", header=None)
    frame = df.iloc[:, 2:].set_axis([f"f{i}" for i in range(30)], axis=1)
    return _frame_to_dataset("wdbc", frame, df[1].to_numpy() == "B", positive_label="B")


def _load_wine_quality(d: Path) -> Dataset:
    parts = [_read_csv(d / f"wine_quality/winequality-{c}.csv", sep=";") for c in ("red", "white")]
    df = pd.concat(parts, ignore_index=True)
    frame = df.drop(columns=["quality"])
    return _frame_to_dataset("wine_quality", frame, df["quality"].to_numpy() >= 6,
                             positive_label="quality>=6")


_UCI = "https://archive.ics.uci.edu/dataset/"
_MONK = f"{_UCI}70/monk+s+problems"

# In the order of the paper's Table 1.
SPECS: dict[str, DatasetSpec] = {
    s.slug: s
    for s in [
        DatasetSpec("diabetes", "Diabetes", ("diabetes/pima-indians-diabetes.data",),
                    "UCI Pima Indians Diabetes (old UCI archive; OpenML id 37)", _load_diabetes),
        DatasetSpec("haberman", "Haberman", ("haberman/haberman.data",),
                    f"{_UCI}43/haberman+s+survival", _load_haberman),
        DatasetSpec("heart", "Heart", ("heart/heart.dat",), f"{_UCI}145/statlog+heart",
                    _load_heart),
        DatasetSpec("ilpd", "ILPD", ("ilpd/Indian Liver Patient Dataset (ILPD).csv",),
                    f"{_UCI}225/ilpd+indian+liver+patient+dataset", _load_ilpd),
        DatasetSpec("monk1", "MONK-1", ("monk1/monks-1.train", "monk1/monks-1.test"), _MONK,
                    _monk_loader(1, positive=1)),
        DatasetSpec("monk2", "MONK-2", ("monk2/monks-2.train", "monk2/monks-2.test"), _MONK,
                    _monk_loader(2, positive=0)),
        DatasetSpec("monk3", "MONK-3", ("monk3/monks-3.train", "monk3/monks-3.test"), _MONK,
                    _monk_loader(3, positive=1)),
        DatasetSpec("abalone", "Abalone", ("abalone/abalone.data",), f"{_UCI}1/abalone",
                    _load_abalone),
        DatasetSpec("adult", "Adult", ("adult/adult.data",), f"{_UCI}2/adult", _load_adult),
        DatasetSpec("banknote", "Banknote", ("banknote/data_banknote_authentication.txt",),
                    f"{_UCI}267/banknote+authentication", _load_banknote),
        DatasetSpec("car", "Car", ("car/car.data",), f"{_UCI}19/car+evaluation", _load_car),
        DatasetSpec("default_credit", "Default Credit",
                    ("default_credit/default of credit card clients.csv",),
                    f"{_UCI}350/default+of+credit+card+clients", _load_default_credit),
        DatasetSpec("iranian_churn", "Iranian Churn", ("iranian_churn/Customer Churn.csv",),
                    f"{_UCI}563/iranian+churn+dataset", _load_iranian_churn),
        DatasetSpec("letter", "Letter C vs U", ("letter/letter-recognition.data",),
                    f"{_UCI}59/letter+recognition", _load_letter),
        DatasetSpec("magic", "MAGIC Gamma", ("magic/magic04.data",),
                    f"{_UCI}159/magic+gamma+telescope", _load_magic),
        DatasetSpec("mushroom", "Mushroom", ("mushroom/agaricus-lepiota.data",),
                    f"{_UCI}73/mushroom", _load_mushroom),
        DatasetSpec("rice", "Rice", ("rice/Rice_Cammeo_Osmancik.arff",),
                    f"{_UCI}545/rice+cammeo+and+osmancik", _load_rice),
        DatasetSpec("spambase", "Spambase", ("spambase/spambase.data",), f"{_UCI}94/spambase",
                    _load_spambase),
        DatasetSpec("wdbc", "WDBC", ("wdbc/wdbc.data",),
                    f"{_UCI}17/breast+cancer+wisconsin+diagnostic", _load_wdbc),
        DatasetSpec("wine_quality", "Wine Quality",
                    ("wine_quality/winequality-red.csv", "wine_quality/winequality-white.csv"),
                    f"{_UCI}186/wine+quality", _load_wine_quality),
    ]
}

DATASET_SLUGS: tuple[str, ...] = tuple(SPECS)


def load_dataset(slug: str, data_dir: str | Path | None = None) -> Dataset:
    """Load one dataset by slug; a missing file raises DataError naming it and its source."""
    spec = SPECS.get(slug)
    if spec is None:
        raise DataError(f"unknown dataset {slug!r}; known: {', '.join(DATASET_SLUGS)}")
    root = resolve_data_dir(data_dir)
    for rel in spec.files:
        if not (root / rel).is_file():
            raise DataError(
                f"dataset {slug!r}: file {root / rel} is missing. It is the UCI file "
                f"'{Path(rel).name}' from {spec.source}; put it at that path (see "
                f"{root / slug / 'SOURCE.md'} for the expected bytes) or pass --data-dir"
            )
    try:
        dataset = spec.loader(root)
    except (ValueError, KeyError, IndexError) as err:
        raise DataError(
            f"dataset {slug!r}: cannot parse {', '.join(spec.files)} under {root}: {err}"
        ) from err
    if dataset.n_positive < dataset.n_negative:
        raise DataError(
            f"dataset {slug!r}: the positive class {dataset.positive_label!r} is not the "
            f"majority ({dataset.n_positive} of {len(dataset.y)}); the file content differs "
            "from the documented one"
        )
    return dataset
