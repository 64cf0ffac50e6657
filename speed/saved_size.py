"""The size of a saved classifier's folder with and without its training table
(``PUICLClassifier.save(folder, training_data=...)``), file by file, on a synthetic table
(docs/performance.md, "Saving without the training table").

    .venv/bin/python -m speed.saved_size --shape 500,4500,20
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from puicl_model import PUICLClassifier


def folder_sizes(folder: Path) -> dict[str, float]:
    """MB per top-level entry of ``folder`` (a directory counts its files)."""
    sizes = {}
    for entry in sorted(folder.iterdir()):
        files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file()]
        sizes[entry.name] = sum(f.stat().st_size for f in files) / 1e6
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="500,4500,20", help="P,n_u,d (default 500,4500,20)")
    args = parser.parse_args()
    n_labeled, n_pool, d = (int(part) for part in args.shape.split(","))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_labeled + n_pool, d))
    x[: n_labeled + n_pool // 2, :3] += 1.0  # the labeled rows and half the pool are positives
    s = np.r_[np.ones(n_labeled, int), np.zeros(n_pool, int)]
    clf = PUICLClassifier(random_state=0, threshold="prior").fit(x, s)
    with tempfile.TemporaryDirectory(prefix="puicl-saved-size-") as root:
        for with_table in (True, False):
            folder = Path(root) / f"training_data_{with_table}"
            clf.save(folder, training_data=with_table)
            sizes = folder_sizes(folder)
            parts = ", ".join(f"{name} {mb:.2f}" for name, mb in sizes.items())
            print(f"training_data={with_table}: {sum(sizes.values()):.1f} MB ({parts})",
                  flush=True)


if __name__ == "__main__":
    main()
