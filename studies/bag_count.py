"""How many bags a bag learner needs: one learner's pool AUC at several bag counts, per task,
on either yardstick.

Each learner is fitted in the portfolio's own bags (``CrossFittedLearner``: bag b trains on the
labeled positives outside fold ``b % 5`` against as many pool rows drawn with replacement, and
scores the pool rows it did not draw) on the portfolio's encoding of the table. Every count of
one learner shares its first bags' keys, so the differences between counts carry no seed noise
of their own. The benchmark's PU-bagging adapter (30 bags, every positive in each) is the
yardstick's record where one is given.

With ``--kept`` (the folder ``studies/portfolio_evidence.py collect`` wrote for the same suite),
each count is also judged in the portfolio's model-weighted blend: the kept model and logistic
scores of the pool with this learner's in the forest's place (``blend_auc``), which is what the
default returns on a table without held-out positives.

    python -m studies.bag_count --suite user --only 3000r --learners hgb100 --bags 5,30 \\
        --out results/bag_count_user.csv
    python -m studies.bag_count --suite dev --cells 600:0.5 --learners forest,hgb100 \\
        --bags 5,30 --out results/bag_count_dev.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from puicl_model.estimator.learners import BAGGED, CrossFittedLearner, encoded_table
from puicl_model.estimator.portfolio_rule import FALLBACK_WEIGHTS
from studies.portfolio_evidence import BAG_VARIANTS, VariantBags, chosen_tasks
from studies.portfolio_replay import Kept, load, true_auc

# the portfolio's forest member, and the bag learners studies/portfolio_evidence.py judges
LEARNERS = ("forest", *BAG_VARIANTS)


def learner(name: str, entropy: int) -> CrossFittedLearner:
    """The bag learner ``name``, one thread, its bags keyed by ``entropy``."""
    if name == "forest":
        return CrossFittedLearner(BAGGED, entropy, n_threads=1)
    return VariantBags(BAGGED, entropy, n_threads=1, factory=BAG_VARIANTS[name])


def blend_auc(kept: Kept, scores: np.ndarray) -> float:
    """The pool AUC of the model-weighted blend with ``scores`` in the forest's place."""
    return true_auc(replace(kept, final={**kept.final, BAGGED: scores}), FALLBACK_WEIGHTS)


def task_rows(X: Any, s: np.ndarray, y: np.ndarray, entropy: int, learners: Sequence[str],
              counts: Sequence[int], kept: Kept | None = None) -> list[dict[str, Any]]:
    """Each learner's pool AUC and seconds at each bag count on one table (and its blend's
    AUC, given the table's kept scores)."""
    x = encoded_table(X, s == 1)[1]
    labeled, pool, y_pool = x[s == 1], x[s == 0], y[s == 0]
    rows = []
    for name in learners:
        for count in counts:
            started = time.perf_counter()
            _, scores = learner(name, entropy).fit(labeled, pool, bags=count)
            seconds = time.perf_counter() - started
            rows.append({"learner": name, "bags": count,
                         "auc": float(roc_auc_score(y_pool, scores)), "seconds": seconds,
                         "blend_auc": np.nan if kept is None else blend_auc(kept, scores)})
    return rows


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per learner and bag count: mean AUC and seconds, and the AUC minus the learner's
    smallest count's on the same task (mean ± SE over tasks, tables where it is higher)."""
    out = []
    for (name, judged), rows in frame.melt(
            id_vars=["task", "learner", "bags"], value_vars=["auc", "blend_auc"],
            var_name="judged").dropna(subset=["value"]).groupby(["learner", "judged"]):
        wide = rows.pivot(index="task", columns="bags", values="value")
        seconds = frame[frame["learner"] == name].groupby("bags")["seconds"].mean()
        base = wide[min(wide.columns)]
        for count in wide.columns:
            diff = wide[count] - base
            out.append({"learner": name, "judged": judged, "bags": count, "tasks": len(diff),
                        "auc": wide[count].mean(), "minus_fewest": diff.mean(),
                        "se": diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan,
                        "higher": int((diff > 0).sum()), "seconds": seconds[count]})
    return pd.DataFrame(out).round(4)


def _kept(folder: Path | None, task: Any) -> Kept | None:
    """The task's kept scores where they hold every pool row of this table and every member
    of the blend (a task too small for the portfolio kept the model alone), else None."""
    path = None if folder is None else folder / f"{task.name}.npz"
    if path is None or not path.exists():
        return None
    kept = load(path, folder)
    whole = np.array_equal(kept.y, task.y[task.s == 0])
    return kept if whole and set(FALLBACK_WEIGHTS) <= set(kept.final) else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.bag_count",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("user", "dev"), required=True)
    parser.add_argument("--tables", default="decision", help="user: decision or unseen")
    parser.add_argument("--only", default="",
                        help="tasks whose name holds one of these (commas)")
    parser.add_argument("--cells", default="600:0.5", help="dev: the size grid's cells")
    parser.add_argument("--learners", default="forest,hgb100")
    parser.add_argument("--bags", default="5,30", help="bag counts (commas)")
    parser.add_argument("--kept", type=Path, default=None,
                        help="the kept scores of the same suite: judge each count in the blend")
    parser.add_argument("--out", type=Path, required=True, help="CSV, one row per task, "
                        "learner and count; a rerun skips the tasks it holds")
    args = parser.parse_args(argv)
    learners = [name for name in args.learners.split(",") if name]
    unknown = sorted(set(learners) - set(LEARNERS))
    if unknown:
        parser.error(f"no learner {', '.join(unknown)}; the learners: {', '.join(LEARNERS)}")
    counts = sorted({int(count) for count in args.bags.split(",")})
    tasks = chosen_tasks(args.suite, args.tables, args.cells, args.only)
    done = pd.read_csv(args.out) if args.out.exists() else pd.DataFrame()
    held = set(done["task"]) if len(done) else set()
    for make in tasks:
        if make.name in held:  # type: ignore[attr-defined]
            continue
        task = make()
        rows = [{"task": task.name, "group": task.group, **row}
                for row in task_rows(task.X, task.s, task.y, task.seed, learners, counts,
                                     _kept(args.kept, task))]
        done = pd.concat([done, pd.DataFrame(rows)], ignore_index=True)
        partial = args.out.with_suffix(".tmp.csv")
        done.to_csv(partial, index=False)
        partial.replace(args.out)  # a stopped run keeps every finished task
        print(f"{task.name}: " + ", ".join(f"{r['learner']}×{r['bags']} {r['auc']:.4f}"
                                           for r in rows), flush=True)
    if not len(done):
        parser.error("no task matched")
    pd.set_option("display.width", 200)
    print(summary(done).to_string(index=False))
    for group, rows in done.groupby("group"):
        print(f"\n{group}:")
        print(summary(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
