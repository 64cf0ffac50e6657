"""Every alternative a user has, run as a user runs it, on the generated tables of
``studies/user_tables.py``: the second yardstick of the classifier's decisions beside the
development suite's size grid.

``run`` fits each method on each table and keeps one JSON record per (table, method) in
``--out`` (written atomically; a rerun skips what is there, so a run resumes). Methods:

* ``default``: ``PUICLClassifier()`` as the README shows it (``fit``, ``predict_proba`` and
  ``predict`` of the pool, then ``class_prior_report()``), one thread. Its record also holds
  the pool AUC of each portfolio member alone (the learners' out-of-fold scores of every pool
  row: what the default could have chosen), its choice, the share ``predict`` labels positive,
  π̂ and its report;
* ``model``: ``PUICLClassifier(portfolio="none")``, the model alone;
* ``pu-bagging`` and ``elkan-noto``: the benchmark's adapters (``benchmark/methods``) on the
  portfolio's learner encoding of the table (one-hot categories, standardized numbers, missing
  indicators), as a user of those libraries would prepare it.

``report`` reads the records: per table the default against the best alternative (each member
alone, the model alone, both adapters), the share of tables within 0.01 of it, per cell the
means, and how ``predict``'s positive share and π̂'s interval meet the truth.

``compare --before RUN... --after RERUN...`` pairs the default's records of a run with reruns
of some of its tables (a change that can move only those): per cell, the mean difference with
its SE and the picks changed.

    python -m studies.user_yardstick run --out results/user --tables decision
    python -m studies.user_yardstick report --out results/user
    python -m studies.user_yardstick compare --before results/user --after results/user_rerun
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from puicl_common.atomic import atomic_write_json
from studies.user_tables import (
    TableSpec,
    decision_specs,
    large_specs,
    make_table,
    unseen_specs,
)

METHODS = ("default", "model", "pu-bagging", "elkan-noto")
# within how much of the best alternative the default must stay on a table (the bar)
BAR = 0.01
# the labels' bar: predict's positive share within this of the truth, or said
BAR_SHARE = 0.10


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


def _seed(spec: TableSpec) -> int:
    return spec.seed % (2**31 - 1)


def _classifier_record(spec: TableSpec, portfolio: str, X: Any, s: np.ndarray,
                       y_pool: np.ndarray) -> dict[str, Any]:
    from puicl_model import PUICLClassifier

    pool = X.iloc[np.flatnonzero(s == 0)]
    started = time.perf_counter()
    clf = PUICLClassifier(random_state=_seed(spec), n_threads=1, progress=False,
                          portfolio=portfolio).fit(X, s)
    proba = clf.predict_proba(pool)[:, 1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = clf.predict(pool)
    fitted = time.perf_counter() - started
    said = [str(w.message) for w in caught if w.category.__name__ == "ThresholdWarning"]
    report = clf.class_prior_report()
    prior_seconds = time.perf_counter() - started - fitted
    record: dict[str, Any] = {
        "auc": _auc(y_pool, proba), "seconds": fitted, "prior_seconds": prior_seconds,
        "positive_share": float(np.mean(labels == 1)),
        "proba_mean": float(proba.mean()),
        "pi_hat": float(report.estimate), "pi_low": float(report.interval[0]),
        "pi_high": float(report.interval[1]),
        "pi_bound": None if report.lower_bound is None else float(report.lower_bound),
        "pi_upper": float(report.upper), "pi_flag": report.status,
        "threshold_note": said[0] if said else None}
    choice = getattr(clf.fitted_, "portfolio", None)
    if choice is not None and choice.choice is not None:
        record["choice"] = choice.choice.name
        record["choice_weights"] = dict(choice.choice.weights)
        record["choice_reason"] = choice.choice.reason
        record["held_out_auc"] = dict(choice.choice.held_out_auc)
        record["lead_se"] = dict(choice.choice.lead_se)
        fitted_rows = clf.fitted_pool_proba()
        if len(fitted_rows) == len(y_pool):  # every pool row fitted: each member alone
            for member, scores in choice.pool_scores.items():
                record[f"auc_{member}"] = _auc(y_pool, scores)
    return record


def _adapter_record(method: str, spec: TableSpec, X: Any, s: np.ndarray,
                    y_pool: np.ndarray) -> dict[str, Any]:
    from puicl_model.estimator.learners import encoded_table

    started = time.perf_counter()
    x = encoded_table(X, s == 1)[1]
    if method == "pu-bagging":
        from benchmark.methods.pu_bagging import PUBagging

        output = PUBagging().fit_predict(x, s, _seed(spec))
    else:
        from benchmark.methods.elkan_noto import ElkanNoto

        output = ElkanNoto().fit_predict(x, s, _seed(spec))
    return {"auc": _auc(y_pool, output.scores), "seconds": time.perf_counter() - started,
            "positive_share": float(np.mean(output.labels == 1)),
            "pi_hat": None if output.pi_hat is None else float(output.pi_hat)}


def run_method(spec: TableSpec, method: str) -> dict[str, Any]:
    """One method on one table, as a user runs it: its record."""
    X, s, y = make_table(spec)
    y_pool = y[s == 0]
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "default": lambda: _classifier_record(spec, "auto", X, s, y_pool),
        "model": lambda: _classifier_record(spec, "none", X, s, y_pool),
        "pu-bagging": lambda: _adapter_record("pu-bagging", spec, X, s, y_pool),
        "elkan-noto": lambda: _adapter_record("elkan-noto", spec, X, s, y_pool)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = runs[method]()
    return {"table": spec.name, "cell": spec.cell, "shape": spec.shape, "signal": spec.signal,
            "rows": spec.rows, "n_labeled": int(s.sum()), "n_pool": len(y_pool),
            "pi": float(1.0 - y_pool.mean()), "method": method, **record}


def record_path(out: Path, spec: TableSpec, method: str) -> Path:
    return out / spec.name / f"{method}.json"


def named_like(items: Sequence[Any], only: str) -> list[Any]:
    """The items (anything with a ``name``) whose name holds one of ``only``'s comma-separated
    parts; every item where ``only`` is empty."""
    parts = [part for part in only.split(",") if part]
    return [item for item in items if not parts or any(part in item.name for part in parts)]


def tables(which: str, repetitions: int) -> list[TableSpec]:
    lists = {"decision": lambda: decision_specs(repetitions),
             "unseen": lambda: unseen_specs(repetitions), "large": large_specs}
    return [spec for part in which.split(",") for spec in lists[part]()]


def _run(args: argparse.Namespace) -> int:
    specs = tables(args.tables, args.repeats)
    specs = named_like(specs, args.only)
    methods = args.methods.split(",")
    jobs = [(spec, method) for spec in specs for method in methods
            if args.force or not record_path(args.out, spec, method).exists()]
    print(f"user_yardstick: {len(jobs)} runs to make of {len(specs) * len(methods)}", flush=True)

    def one(spec: TableSpec, method: str) -> str:
        record = run_method(spec, method)
        path = record_path(args.out, spec, method)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, record)
        return (f"{spec.name} {method}: AUC {record['auc']:.4f} in {record['seconds']:.1f} s"
                + (f" ({record.get('choice')})" if "choice" in record else ""))

    if args.jobs == 1:
        for spec, method in jobs:
            print(one(spec, method), flush=True)
    else:
        from joblib import Parallel, delayed

        for line in Parallel(n_jobs=args.jobs, return_as="generator")(
                delayed(one)(spec, method) for spec, method in jobs):
            print(line, flush=True)
    return 0


# ------------------------------------------------------------------------------- report
def load_records(out: Path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(path.read_text()) for path in sorted(out.glob("*/*.json"))])


def per_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per table: every method's AUC, each member alone's, the best alternative and
    the default's distance to it."""
    auc = records.pivot(index="table", columns="method", values="auc")
    default = records[records["method"] == "default"].set_index("table")
    frame = auc.join(default[["cell", "shape", "signal", "pi", "n_labeled", "n_pool"]])
    for member in ("logistic", "bagged"):
        column = f"auc_{member}"
        if column in default:
            frame[member] = default[column]
    alternatives = [c for c in ("model", "pu-bagging", "elkan-noto", "logistic", "bagged")
                    if c in frame]
    frame["best_alternative"] = frame[alternatives].max(axis=1)
    frame["best_name"] = frame[alternatives].idxmax(axis=1)
    frame["vs_best"] = frame["default"] - frame["best_alternative"]
    if "model" in frame:
        frame["vs_model"] = frame["default"] - frame["model"]
    frame["choice"] = default.get("choice")
    frame["positive_share"] = default["positive_share"]
    frame["true_share"] = 1.0 - default["pi"]
    frame["pi_hat"] = default["pi_hat"]
    frame["covered"] = (default["pi_low"] <= default["pi"]) & (default["pi"] <= default["pi_high"])
    frame["pi_flag"] = default["pi_flag"]
    if "threshold_note" in default:
        # what predict says now: a record written before its last check (probabilities that
        # crowd the cut) is read with that check, from the record's share and mean probability
        from puicl_model.estimator.prior_report import crowds_the_cut

        crowded = [crowds_the_cut(1.0 - share, 1.0 - mean) for share, mean
                   in zip(default["positive_share"], default["proba_mean"], strict=True)]
        frame["cut_said"] = default["threshold_note"].notna() | pd.Series(
            crowded, index=default.index)
        frame["unplaced_range"] = default["threshold_note"].map(_unplaced_range)
    seconds = records.pivot(index="table", columns="method", values="seconds")
    for method in seconds:
        frame[f"s_{method}"] = seconds[method]
    frame["s_prior"] = default["prior_seconds"]
    return frame


def _unplaced_range(note: Any) -> tuple[float, float] | None:
    """The range π is placed in by predict's line that its share is unplaced, else None."""
    from puicl_model.estimator.prior_report import UNPLACED_MARK

    if not isinstance(note, str) or UNPLACED_MARK not in note:
        return None
    found = re.search(r"between (\d+)% and (\d+)%", note)
    assert found is not None, note
    return int(found[1]) / 100.0, int(found[2]) / 100.0


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell and over every table ("all"): the means, the bars' shares, and where the
    adapters ran, the default's paired difference to PU bagging with its SE over the tables."""
    frame = pd.concat([frame, frame.assign(cell="all")])
    cells = frame.groupby("cell")
    out = pd.DataFrame({
        "tables": cells.size(),
        "default": cells["default"].mean(),
        "best_alt": cells["best_alternative"].mean(),
        "vs_best": cells["vs_best"].mean(),
        "within_bar": cells["vs_best"].apply(lambda v: (v >= -BAR).mean()),
        "share_err_gt_0.1": (frame.assign(err=(frame["positive_share"]
                                               - frame["true_share"]).abs() > BAR_SHARE)
                             .groupby("cell")["err"].mean()),
        # the bar: the share within 0.10 of the truth, or the cut's check said so
        "share_ok_or_said": (frame.assign(ok=((frame["positive_share"]
                                               - frame["true_share"]).abs() <= BAR_SHARE)
                                          | frame.get("cut_said", False))
                             .groupby("cell")["ok"].mean()),
        "pi_covered": cells["covered"].mean()})
    for method in ("model", "pu-bagging", "elkan-noto", "logistic", "bagged"):
        if method in frame:
            out[method] = cells[method].mean()
    if "pu-bagging" in frame:
        out["vs_pu_bagging"], out["vs_pu_bagging_se"] = _paired(
            (frame["default"] - frame["pu-bagging"]).groupby(frame["cell"]))
    return out.round(4)


def _paired(differences: Any) -> tuple[pd.Series, pd.Series]:
    """The mean of grouped paired differences and its SE over the group's tables."""
    return (differences.mean(),
            differences.std(ddof=1) / np.sqrt(differences.count()))


def said_line(frame: pd.DataFrame) -> str:
    """Where predict says its cut cannot place the labels: how often the 0.5 cut and
    threshold="prior" (π̂ of the pool negative) put the positive share within 0.10 of the truth."""
    said = frame[frame["cut_said"]]
    cut = ((said["positive_share"] - said["true_share"]).abs() <= BAR_SHARE).sum()
    prior = ((1.0 - said["pi_hat"] - said["true_share"]).abs() <= BAR_SHARE).sum()
    line = (f"predict's line on {len(said)} of {len(frame)} tables; there the share is within "
            f"{BAR_SHARE} of the truth at the 0.5 cut on {cut}, at threshold='prior' on {prior}")
    if "unplaced_range" in frame:
        ranges = frame["unplaced_range"].dropna()
        pi = 1.0 - frame.loc[ranges.index, "true_share"]
        inside = sum(low - 0.005 <= p <= high + 0.005  # the line's ranges are whole percents
                     for (low, high), p in zip(ranges, pi, strict=True))
        missed = ((frame.loc[ranges.index, "positive_share"]
                   - frame.loc[ranges.index, "true_share"]).abs() > BAR_SHARE).sum()
        line += (f"; the line that the share is unplaced on {len(ranges)} (a miss of more than "
                 f"{BAR_SHARE} on {missed}), π inside the range it names on {inside}")
    return line


def model_alone_records(kept: Path) -> pd.DataFrame:
    """The model alone's records read off ``studies/portfolio_evidence.py``'s kept scores:
    the default scores the pool as the model alone does (every table's model scores are the
    model alone's, bit for bit), so its AUC need not be run again."""
    from sklearn.metrics import roc_auc_score

    rows = []
    for path in sorted(kept.glob("*.npz")):
        with np.load(path) as data:
            rows.append({"table": path.stem, "method": "model",
                         "auc": float(roc_auc_score(data["y_pool"], data["model_pool"])),
                         "seconds": float("nan")})
    return pd.DataFrame(rows)


def compare(before: Sequence[Path], after: Sequence[Path]) -> pd.DataFrame:
    """Per cell and over every table: the default's AUC with the records of ``after`` (reruns
    of some tables) in place of ``before``'s, minus ``before``'s; on each side the first run
    holding a table wins. The mean and SE over ``before``'s tables (those not rerun count 0)
    and over the rerun ones alone, the picks changed, and the rerun tables' seconds."""
    def defaults(runs: Sequence[Path]) -> pd.DataFrame:
        records = pd.concat([load_records(out) for out in runs])
        records = records[records["method"] == "default"].set_index("table")
        return records[~records.index.duplicated(keep="first")]

    old = defaults(before)
    new = defaults(after).reindex(old.index)
    rerun = new["auc"].notna()
    frame = pd.DataFrame({
        "cell": old["cell"],
        "difference": (new["auc"] - old["auc"]).where(rerun, 0.0),
        "changed": rerun & (new["choice"] != old["choice"]),
        "rerun": rerun,
        "seconds_before": old["seconds"].where(rerun, 0.0),
        "seconds_after": new["seconds"].where(rerun, 0.0)})
    frame = pd.concat([frame, frame.assign(cell="all")])
    cells = frame.groupby("cell")
    mean, se = _paired(cells["difference"])
    reran = frame[frame["rerun"]]
    mean_rerun, se_rerun = _paired(reran["difference"].groupby(reran["cell"]))
    return pd.DataFrame({
        "tables": cells.size(), "rerun": cells["rerun"].sum(), "difference": mean, "se": se,
        "rerun_difference": mean_rerun, "rerun_se": se_rerun,
        "worst": cells["difference"].min(), "best": cells["difference"].max(),
        "picks_changed": cells["changed"].sum(), "seconds_before": cells["seconds_before"].sum(),
        "seconds_after": cells["seconds_after"].sum()}).round(4)


def _report(args: argparse.Namespace) -> int:
    records = pd.concat([load_records(args.out), *[load_records(d) for d in args.alternatives]])
    if args.model_from is not None:
        records = pd.concat([records[records["method"] != "model"],
                             model_alone_records(args.model_from)])
    records = records.drop_duplicates(["table", "method"], keep="first")
    records = records[records["table"].isin(records.loc[records["method"] == "default",
                                                        "table"])]
    frame = per_table(records)
    pd.set_option("display.width", 200)
    columns = [c for c in ("cell", "default", "model", "logistic", "bagged", "pu-bagging",
                           "elkan-noto", "vs_best", "best_name", "choice", "positive_share",
                           "true_share", "pi_hat", "covered") if c in frame]
    print(frame[columns].round(3).to_string())
    print(summary(frame).to_string())
    if "cut_said" in frame:
        print(said_line(frame))
    if args.csv:
        frame.to_csv(args.csv)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.user_yardstick",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="fit every method on every table, keep the records")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--tables", default="decision", help="decision, unseen, large (commas)")
    run.add_argument("--repeats", type=int, default=1, help="draws of the design per list")
    run.add_argument("--methods", default=",".join(METHODS))
    run.add_argument("--only", default="", help="tables whose name holds one of these")
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--force", action="store_true", help="run again what has a record")
    report = sub.add_parser("report", help="per table and per cell, against the bar")
    report.add_argument("--out", type=Path, required=True)
    report.add_argument("--csv", type=Path, default=None)
    report.add_argument("--alternatives", type=Path, action="append", default=[],
                        help="another run's records (the adapters'), read beside --out's")
    report.add_argument("--model-from", type=Path, default=None,
                        help="the model alone's AUC read off these kept evidence scores")
    both = sub.add_parser("compare", help="the default's AUC with reruns in place of a run's")
    both.add_argument("--before", type=Path, nargs="+", required=True,
                      help="the runs before (the first holding a table wins)")
    both.add_argument("--after", type=Path, nargs="+", required=True,
                      help="reruns of some of those tables (the first holding a table wins)")
    args = parser.parse_args(argv)
    if args.command == "compare":
        pd.set_option("display.width", 200)
        print(compare(args.before, args.after).to_string())
        return 0
    return _run(args) if args.command == "run" else _report(args)


if __name__ == "__main__":
    sys.exit(main())
