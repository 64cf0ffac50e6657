"""Writes the saved classifier folders of ``test_saved_formats.py`` with the code of the
checkout it runs in (these were written at 98ce618: format versions 1 and 2), and the scores
the classifiers loaded from them gave there.

    cd CHECKOUT && PYTHONPATH=. python tests/model/data/saved_formats/make_folders.py OUT
"""

import sys
from pathlib import Path

import numpy as np

from puicl_model import PUICLClassifier
from tests.model.conftest import make_model

out = Path(sys.argv[1])
rng = np.random.default_rng(7)
X = rng.normal(size=(200, 4))
X[:110] += 1.0  # the 50 labeled positives, then 60 pool positives
s = np.zeros(200, int)
s[:50] = 1
new = rng.normal(size=(8, 4)) + 0.5
model = make_model()
expected = {"X": X, "s": s, "new": new}
for name, settings, with_table in (("with_table", {}, True),
                                   ("without_table", {"threshold": "prior"}, False)):
    clf = PUICLClassifier(weights=model, device="cpu", random_state=3, n_threads=1,
                          **settings).fit(X, s)
    clf.save(out / name, training_data=with_table)
    loaded = PUICLClassifier.load(out / name, device="cpu")
    expected[f"{name}_pool"] = (loaded.predict_proba(X[s == 0]) if with_table
                                else np.zeros(0))
    expected[f"{name}_new"] = loaded.predict_proba(new)
    expected[f"{name}_labels"] = loaded.predict(new)
np.savez(out / "expected.npz", **expected)
