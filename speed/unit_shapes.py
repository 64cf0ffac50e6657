"""What padded unit shapes cost in arithmetic: the padding's share of a step, by stage.

No timing: the prior's planned task sizes (``prior_gen.paper.factors.plan_step``, nothing is
generated) are cut into units as the unit step cuts them (``trainer.units.UnitPlan``: ordered by
row count, ``--units`` units of the global batch, each one micro-batch) and each unit is padded
to its shape from a set (``trainer.units.padded_size``). For steps 0..N-1 of each stage it
prints, per shape set:

* cells: the padded block's cells (tasks × rows × (features + 1)) over the tasks' own cells,
  what the projections, norms and feed-forward pay;
* row scores: the row attention's scores (columns × rows²) over the tasks' own, what the
  attention across rows pays;
* shapes: how many distinct padded shapes the steps met (a compiled graph or a captured CUDA
  graph each).

``none`` pads each unit to its own largest task (no set: a new shape nearly every unit).

    python -m speed.unit_shapes --config configs/paper.yaml --stages 1,50,100 --steps 50
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prior_gen.config import load_generation_config
from prior_gen.paper.factors import plan_step
from trainer.config import UnitShapes
from trainer.units import UnitPlan, padded_size

_DEFAULT = UnitShapes()
SETS = {
    "none": None,
    "default (sqrt2)": (_DEFAULT.rows, _DEFAULT.features),
    "doubling": ((64, 128, 256, 512, 1024, 2048, 4096), _DEFAULT.features),
    "doubling, features 20": ((64, 128, 256, 512, 1024, 2048, 4096), (20,)),
    "grid 128": (tuple(range(128, 4097, 128)), _DEFAULT.features),
}


def costs(sizes: list[list[tuple[int, int]]], units: int, shapes) -> tuple[float, float, int]:
    """(cells ratio, row-score ratio, distinct shapes) of steps of (rows, features) tasks."""
    real_cells = padded_cells = real_scores = padded_scores = 0
    met = set()
    for step in sizes:
        plan = UnitPlan(len(step), units, 1, 0)
        for unit in plan.unit_tasks([rows for rows, _ in step]):
            tasks = [step[i] for i in unit]
            rows = max(r for r, _ in tasks)
            features = max(f for _, f in tasks)
            if shapes is not None:
                rows, features = padded_size(rows, shapes[0]), padded_size(features, shapes[1])
            met.add((len(tasks), rows, features))
            real_cells += sum(r * (f + 1) for r, f in tasks)
            real_scores += sum((f + 1) * r * r for r, f in tasks)
            padded_cells += len(tasks) * rows * (features + 1)
            padded_scores += len(tasks) * (features + 1) * rows * rows
    return padded_cells / real_cells, padded_scores / real_scores, len(met)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.unit_shapes",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/paper.yaml"))
    parser.add_argument("--stages", default="1,50,100")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--units", type=int, default=4)
    args = parser.parse_args(argv)
    config = load_generation_config(args.config)
    print("| stage | shape set | cells, padded / own | row scores, padded / own | shapes |")
    print("|---|---|---:|---:|---:|")
    for text in args.stages.split(","):
        stage = text if text == "tail" else int(text)
        sizes = [[(p.n_labeled + p.n_unlabeled, p.n_features)
                  for p in plan_step(config, "train", stage, step)]
                 for step in range(args.steps)]
        for name, shapes in SETS.items():
            cells, scores, met = costs(sizes, args.units, shapes)
            print(f"| {text} | {name} | {cells:.2f} | {scores:.2f} | {met} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
