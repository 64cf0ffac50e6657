"""Writes the saved classifier folder of ``test_text_readings.py``, fitted by the code of the
checkout it runs in (this one was written at 8e6e500, before text columns of dates or of
numbers with stray cells were read as dates or numbers, and before dates' seconds were read
the same in every unit), and what the classifier loaded from it gave there: its scores of the
fitted pool and of new rows, and its encoding of the new rows.

    cd CHECKOUT && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=. python \\
        tests/model/data/text_columns/make_folder.py OUT
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from puicl_model import PUICLClassifier
from tests.model.conftest import make_model


def table(rows: int, seed: int) -> pd.DataFrame:
    """Dates as ISO text (40 distinct), numbers as text with one stray word, a date-time column
    in nanoseconds with milliseconds, and a column of numbers."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 40, rows), unit="D")
    amounts = rng.normal(size=rows).round(2).astype(str).astype(object)
    amounts[3] = "abc"
    stamps = (pd.Timestamp("2023-06-01")
              + pd.to_timedelta(rng.integers(0, 10**10, rows), unit="ms"))
    return pd.DataFrame({"day": days.strftime("%Y-%m-%d").astype(object), "amount": amounts,
                         "stamp": pd.Series(stamps).astype("datetime64[ns]"),
                         "x": rng.normal(size=rows)})


out = Path(sys.argv[1])
X = table(200, 7)
s = np.zeros(200, int)
s[:50] = 1
X.loc[:109, "x"] += 1.0  # the 50 labeled positives, then 60 pool positives
new = pd.concat([X.iloc[[60, 120, 199]], table(5, 8)], ignore_index=True)
clf = PUICLClassifier(weights=make_model(), device="cpu", random_state=3, n_threads=1)
clf.fit(X, s).save(out / "folder", training_data=True)
loaded = PUICLClassifier.load(out / "folder", device="cpu")
np.savez(out / "expected.npz", pool=loaded.predict_proba(X[s == 0]),
         new=loaded.predict_proba(new), encoded=loaded.preprocessor_.transform(new),
         portfolio_encoded=(loaded.portfolio_.encoder.transform(new)
                            if loaded.portfolio_ is not None else np.zeros(0)))
X.assign(s=s).to_parquet(out / "table.parquet")
new.to_parquet(out / "new.parquet")
