"""Writes the saved folder of ``test_saved_formats.py``'s table with positives held out of the
passes, with the code of the checkout it runs in (this one was written at 67a9e36, where held-out
positives were kept out of every pass's context and followed the pool in each view), and what
the classifier loaded from it gave there: the pool's scores, new rows', π̂ and the held-out
scores π̂ reads.

    cd CHECKOUT && PYTHONPATH=. python tests/model/data/held_out_folder/make_folder.py OUT
"""

import sys
from pathlib import Path

import numpy as np

from puicl_model import PUICLClassifier
from tests.model.conftest import make_model

out = Path(sys.argv[1])
rng = np.random.default_rng(11)
X = rng.normal(size=(920, 4))
X[:800] += 0.8  # the 620 labeled positives, then 180 pool positives
s = np.zeros(920, int)
s[:620] = 1
new = rng.normal(size=(8, 4)) + 0.5
clf = PUICLClassifier(weights=make_model(), device="cpu", random_state=3, n_threads=1).fit(X, s)
assert clf.n_held_out_ > 0
clf.save(out / "folder")
loaded = PUICLClassifier.load(out / "folder", device="cpu")
held, pool = loaded.held_out_scores()[0]
np.savez(out / "expected.npz", X=X, s=s, new=new, pool=loaded.predict_proba(X[s == 0]),
         new_scores=loaded.predict_proba(new), pi_hat=loaded.estimate_class_prior(),
         held=held, held_pool=pool)
