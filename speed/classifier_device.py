"""The classifier on a device: rows per second of the pool's scoring, whether two fits score
it byte for byte alike, and how far the device's scores are from the CPU's.

A table of ``--rows`` rows of ``--columns`` numeric columns whose first ``--labeled`` rows are
the labeled positives (the pool: the rest, half of it positives). ``PUICLClassifier`` with the
model alone (``portfolio="none"``) is fitted and scores its pool twice on ``--device``, each
time a new classifier: the first call's time holds the device's warm-up, so the second's gives
the rows per second. The two score vectors are compared byte for byte (run-to-run
stability on one device). Then a ``--cpu-rows``-row table is scored on the device and on the
CPU, and the largest difference of the probabilities is printed (bf16 autocast on CUDA
against float32 on the CPU, as ``precision="auto"`` chooses).

    python -m speed.classifier_device --device cuda --rows 50000
    python -m speed.classifier_device --device cpu --rows 3000 --cpu-rows 600
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from puicl_model import PUICLClassifier


def table(rows: int, columns: int, labeled: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features and the labeled indicator: positives shifted from the negatives."""
    rng = np.random.default_rng(seed)
    positive = np.ones(rows, dtype=bool)
    positive[labeled:] = rng.random(rows - labeled) < 0.5
    x = rng.normal(size=(rows, columns)) + positive[:, None] * np.linspace(0.2, 1.0, columns)
    s = np.zeros(rows, dtype=int)
    s[:labeled] = 1
    return x.astype(np.float32), s


def pool_scores(x: np.ndarray, s: np.ndarray, device: str) -> tuple[np.ndarray, float]:
    """P(positive) of the pool rows, and the seconds of fit and scoring."""
    began = time.perf_counter()
    classifier = PUICLClassifier(device=device, portfolio="none", random_state=0, progress=False)
    proba = classifier.fit(x, s).predict_proba(x[s == 0])[:, 1]
    return proba, time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.classifier_device",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--columns", type=int, default=16)
    parser.add_argument("--labeled", type=int, default=2_000)
    parser.add_argument("--cpu-rows", type=int, default=3_000)
    args = parser.parse_args(argv)
    x, s = table(args.rows, args.columns, args.labeled)
    first, first_seconds = pool_scores(x, s, args.device)
    second, seconds = pool_scores(x, s, args.device)
    pool = int((s == 0).sum())
    same = first.tobytes() == second.tobytes()
    digest = hashlib.sha256(second.tobytes()).hexdigest()[:16]
    print(f"{args.device}: {pool} pool rows of {args.columns} columns, {args.labeled} labeled: "
          f"{first_seconds:.2f} s then {seconds:.2f} s ({pool / seconds:.0f} rows/s); two fits "
          f"{'IDENTICAL' if same else 'DIFFERENT'} (sha256 {digest}, max abs diff "
          f"{np.abs(first - second).max():.2e})", flush=True)
    small_x, small_s = table(args.cpu_rows, args.columns, min(args.labeled, args.cpu_rows // 3))
    on_device, _ = pool_scores(small_x, small_s, args.device)
    on_cpu, _ = pool_scores(small_x, small_s, "cpu")
    print(f"{args.device} against cpu, {len(on_cpu)} pool rows: max abs diff of the "
          f"probabilities {np.abs(on_device - on_cpu).max():.2e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
