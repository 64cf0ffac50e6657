"""The default classifier on the development suite's tasks, built as the size grid builds them
(:func:`studies.portfolio_evidence.dev_tasks`): one JSON record per task with the pool AUC,
the choice, the share ``predict`` labels positive and the seconds of ``fit``, so that two
checkouts run on the same tasks compare per task.

``run`` writes ``OUT/<cell>/<table>.json`` atomically and skips a record that is there (a run
resumes). ``compare A B`` prints, per cell and overall, B's AUC minus A's with the SE over the
tasks, the picks that changed and the seconds of each.

    python -m studies.dev_default run --out results/dev_default --cells all:0.2,all:0.5 \\
        --only covid_testing,titanic_survival
    PYTHONPATH=<other checkout> python -m studies.dev_default run --out results/dev_before ...
    python -m studies.dev_default compare results/dev_before results/dev_default
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from puicl_common.atomic import atomic_write_json
from puicl_model.estimator.pool_sample import take_rows
from studies.portfolio_evidence import Task, dev_tasks, fit_default
from studies.user_yardstick import named_like


def run_task(make: Callable[[], Task], out: Path) -> str:
    """Fit the default on the task ``make`` builds, unless its record is kept."""
    from sklearn.metrics import roc_auc_score

    path = out / f"{make.name}.json"
    if path.exists():
        return f"{make.name}: kept"
    task = make()
    clf, seconds = fit_default(task)
    pool = task.s == 0
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proba = clf.predict_proba(take_rows(task.X, np.flatnonzero(pool)))[:, 1]
    seconds += time.perf_counter() - started
    y = task.y[pool]
    choice = clf.choice_
    record = {"task": make.name, "group": make.group, "n_labeled": int(task.s.sum()),
              "n_pool": int(pool.sum()), "pi": float(1.0 - y.mean()),
              "auc": float(roc_auc_score(y, proba)),
              "choice": "model alone" if choice is None else choice.name,
              "read_evidence": bool(choice is not None and choice.read_evidence),
              "choice_reason": "" if choice is None else choice.reason,
              "positive_share": float(np.mean(proba > 0.5)), "seconds": seconds}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, record)
    return f"{make.name}: AUC {record['auc']:.4f} ({record['choice']}) in {seconds:.1f} s"


def load(out: Path) -> pd.DataFrame:
    rows = [json.loads(path.read_text()) for path in sorted(out.rglob("*.json"))]
    if not rows:
        raise SystemExit(f"no records under {out}")
    return pd.DataFrame(rows).set_index("task")


def compare(before: Path, after: Path) -> pd.DataFrame:
    """Per cell and overall: after's AUC minus before's (mean, SE over the tasks, worst), the
    picks changed and the seconds of each, on the tasks both hold."""
    a, b = load(before), load(after)
    both = a.index.intersection(b.index)
    frame = pd.DataFrame({"group": a.loc[both, "group"],
                          "difference": b.loc[both, "auc"] - a.loc[both, "auc"],
                          "changed": a.loc[both, "choice"] != b.loc[both, "choice"],
                          "seconds_before": a.loc[both, "seconds"],
                          "seconds_after": b.loc[both, "seconds"]})
    rows = {}
    for name, part in [*frame.groupby("group"), ("ALL", frame)]:
        diff = part["difference"]
        rows[name] = {"tasks": len(part), "difference": diff.mean(),
                      "se": diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan,
                      "worst": diff.min(), "best": diff.max(),
                      "picks_changed": int(part["changed"].sum()),
                      "seconds_before": part["seconds_before"].sum(),
                      "seconds_after": part["seconds_after"].sum()}
    return pd.DataFrame(rows).T


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.dev_default",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--cells", default="all:0.2,all:0.5,all:c0.05")
    run.add_argument("--only", default="", help="tasks whose name holds one of these")
    run.add_argument("--repeats", type=int, default=1)
    both = commands.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        pd.set_option("display.width", 200)
        print(compare(args.before, args.after).round(4).to_string())
        return 0
    tasks = named_like(dev_tasks(args.cells, args.repeats), args.only)
    print(f"dev_default: {len(tasks)} tasks", flush=True)
    for make in tasks:
        print(run_task(make, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
