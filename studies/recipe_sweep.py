"""The recipe study's protocol (docs/recipe.md): train variants of a base recipe for the same CPU
budget and score each on two yardsticks.

A *plan* (``configs/recipe_study/plan.yaml``) names the base config, the budget and the
variants; a variant is a set of dotted-key overrides of the base (``training.phase1.peak_lr:
3.0e-3``) plus, where its steps cost more or less than the base's, ``step_cost``: its measured
seconds per step relative to the base's, so that its step count is ``budget_steps /
step_cost`` (the same CPU time). For each variant the script

1. writes its run config: the base with the overrides, the curriculum scaled to its steps
   (the base's stage count; 80 % of the steps in stages, 20 % in the tail; warmups scaled
   alike), periodic validation off (the yardsticks below are computed afterwards, on fixed
   data), a checkpoint every quarter of the run;
2. generates its train shards (``prior-gen``), shared by every variant with the same prior and
   curriculum, so that variants that change the model or the training read the same tasks;
3. trains it with ``trainer/main.py --threads THREADS`` and records the process's CPU time;
4. scores the exported weights of every kept checkpoint on the fixed synthetic validation
   split: the paper's prior (``configs/paper.yaml``, paper §2) at stages 1, 50, 100 and the
   tail, 48 tasks each, so that no variant's prior is favoured;
5. scores the exported weights on the development suite, the yardstick every decision is
   read from: ``puicl-bench --suite dev --methods puicl`` on its 40 tables at π = 0.2, 0.5 and
   0.8, ``dev_repeats`` (2) repetitions each, with the classifier's defaults or the plan's
   ``dev_settings``. The benchmark's 20 datasets play no part: they report shipped models.
   A plan may add ``dev_labelings: [sar-linear, ...]``: the same suite, π, repetitions and
   settings again under each biased labeling (``puicl-bench --labeling``), each in its own
   ``dev_suite_<mechanism>/``, reported as the summary's ``dev_by_labeling``.

A plan may name ``base_variant`` (default: its first variant), against which every variant's
dev-suite difference is reported, paired by table, and ``noise: [variant, variant_seed1]``, two
seeds of one variant whose difference is the study's noise, printed next to every difference.

Results go to ``OUT/<variant>/summary.json``; ``--table`` prints the study's markdown table
(and one per biased labeling scored) and draws validation AUC against CPU-minutes
(``--figure``). ``--rescore VARIANT`` scores a trained variant's exported weights under the
plan's ``dev_labelings`` that its summary lacks, without training it again.
``--align-settings VARIANT`` scores its yardsticks again where their results (by their
``provenance.json``) were computed with other classifier settings than the plan's
``dev_settings`` give with the current defaults: a classifier default that changed between two
variants would otherwise enter their difference.

    .venv/bin/python -m studies.recipe_sweep --plan configs/recipe_study/plan.yaml v0 ema_0.99
    .venv/bin/python -m studies.recipe_sweep --plan configs/recipe_study/plan.yaml --table \\
        --figure docs/recipe/val_auc_vs_cpu.png
    .venv/bin/python -m studies.recipe_sweep --plan configs/prior_study/plan.yaml \\
        --out runs/prior_study --rescore v1_prior
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import hashlib
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmark.labeling import LABELINGS, SCAR, parse_labeling
from prior_gen.shards import open_shards
from puicl_common.atomic import atomic_write_json, atomic_write_text
from puicl_common.configio import load_yaml
from puicl_common.output_paths import save_figure
from puicl_model.net.backends.packed_inference import inference_logits
from trainer.batching import collate_with_targets, plan_micro_batches
from trainer.evaluation import score_task
from trainer.export import exported_model

ROOT = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent
VAL_STAGES = ("1", "50", "100", "tail")
# repetitions per table and π of the development suite's figure (benchmark/summary.py)
DEV_REPEATS = 2
# the fields of one dev-suite score (dev_suite_score), under SCAR or under one biased labeling
DEV_FIELDS = ("dev_auc", "dev_se", "dev_by_pi", "dev_per_table")


# --------------------------------------------------------------------------- configs ------
def load_plan(path: Path) -> dict[str, Any]:
    plan = yaml.safe_load(path.read_text())
    for key in ("base", "budget_steps", "variants"):
        if key not in plan:
            raise SystemExit(f"{path}: the plan lacks {key!r}")
    check_dev_labelings(path, plan.get("dev_labelings"))
    bar = plan.get("bar")
    if bar is not None and (isinstance(bar, bool) or not isinstance(bar, int | float)
                            or not math.isfinite(bar)):
        raise SystemExit(f"{path}: bar must be a finite number, got {bar!r}")
    return plan


def check_dev_labelings(path: Path, labelings: Any) -> None:
    """A plan's ``dev_labelings``: absent, or a list of distinct biased mechanisms of
    ``puicl-bench --labeling`` (SCAR is the suite's own yardstick, always scored)."""
    if labelings is None:
        return
    if not isinstance(labelings, list) or not all(isinstance(m, str) for m in labelings):
        raise SystemExit(f"{path}: dev_labelings must be a list of mechanisms, got {labelings!r}")
    for mechanism in labelings:
        try:
            parse_labeling(mechanism)
        except ValueError as error:
            raise SystemExit(f"{path}: dev_labelings: {error}") from None
    if SCAR in labelings:
        raise SystemExit(f"{path}: dev_labelings: {SCAR!r} is always scored; list biased "
                         f"mechanisms only ({', '.join(LABELINGS[1:])})")
    if len(set(labelings)) != len(labelings):
        raise SystemExit(f"{path}: dev_labelings names a mechanism twice: {labelings}")


def set_dotted(mapping: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = mapping
    for key in parents:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise SystemExit(f"override {dotted!r}: {key!r} is not a mapping in the base config")
    node[leaf] = copy.deepcopy(value)


def variant_steps(plan: dict[str, Any], name: str) -> int:
    variant = plan["variants"][name] or {}
    scale = float(plan.get("budget_scale", 1.0)) * float(variant.get("budget_scale", 1.0))
    return max(20, round(plan["budget_steps"] * scale / float(variant.get("step_cost", 1.0))))


def variant_config(plan: dict[str, Any], name: str) -> dict[str, Any]:
    """The run config of one variant: base + overrides, curriculum scaled to its steps.

    The base is read resolved (its ``extends`` merged in), as the trainer would read it."""
    config = load_yaml(ROOT / plan["base"])
    variant = plan["variants"][name] or {}
    for dotted, value in (variant.get("set") or {}).items():
        set_dotted(config, dotted, value)
    steps = variant_steps(plan, name)
    curriculum = config["curriculum"]
    stages = int(curriculum["stages"])
    per_stage = max(1, round(0.8 * steps / stages))
    curriculum["steps_per_stage"] = per_stage
    curriculum["tail_steps"] = max(1, steps - per_stage * stages)
    training = config["training"]
    training["phase1"]["warmup_steps"] = max(1, round(0.08 * per_stage * stages))
    training["phase2"]["warmup_steps"] = max(1, round(0.1 * curriculum["tail_steps"]))
    # the validation curve: four points
    training["checkpoint_every"] = max(1, steps // 4)
    training["keep_checkpoints"] = 5
    config["validation"]["every_steps"] = 0
    return config


def generation_key(config: dict[str, Any]) -> str:
    """Which shards a config reads: its seed, prior, curriculum and shard format."""
    part = {k: config.get(k) for k in ("seed", "prior", "curriculum", "shards")}
    canonical = json.dumps(part, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def run(command: list[str], log: Path) -> float:
    """Run a command, its output appended to ``log``; returns its CPU seconds (all children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("a") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        done = subprocess.run(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}; see {log}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# ------------------------------------------------------------------------ yardsticks ------
def fixed_val_dir(out: Path, log: Path) -> Path:
    directory = out / "val_paper_prior"
    run([str(BIN / "prior-gen"), "--config", "configs/paper.yaml", "--split", "val",
         "--stages", ",".join(VAL_STAGES), "--steps", "0-0", "--out", str(directory),
         "--workers", "2"], log)
    return directory


def load_fixed_val(directory: Path) -> list:
    reader = open_shards(directory, "val")
    return [task for stage in VAL_STAGES for task in reader.read_step(stage, 0)]


@torch.no_grad()
def val_scores(model: torch.nn.Module, tasks: list) -> dict[str, float]:
    """Mean AUC / accuracy / loss of the model on the fixed validation tasks."""
    model.eval()
    aucs, accuracies, losses = [], [], []
    groups = plan_micro_batches([t.x.shape[0] for t in tasks], [t.x.shape[1] for t in tasks], 8)
    for group in groups:
        chosen = [tasks[i] for i in group]
        batch, _, _ = collate_with_targets(chosen)
        logits = inference_logits(model, batch).float()
        for position, task in enumerate(chosen):
            n_labeled, n_rows = int(task.n_labeled), task.x.shape[0]
            scores = score_task(logits[position, n_labeled:n_rows].numpy(),
                                task.y[n_labeled:], "-")
            aucs.append(scores.auc)
            accuracies.append(scores.accuracy)
            losses.append(scores.loss)
    return {"val_auc": float(np.nanmean(aucs)), "val_accuracy": float(np.mean(accuracies)),
            "val_loss": float(np.mean(losses))}


def dev_suite_score(weights: Path, where: Path, settings: dict[str, Any] | None = None,
                    repeats: int = DEV_REPEATS, labeling: str = SCAR) -> dict[str, Any]:
    """The decision yardstick for ``weights``: ``puicl-bench --suite dev --methods puicl`` at
    π = 0.2, 0.5 and 0.8, with the classifier's defaults or the given ``puicl:`` settings of
    ``--method-config``, its positives labeled by ``labeling`` (SCAR: the protocol's uniform
    third). Returns the suite's figure (mean AUC over tables, repetitions and π) with its
    standard error across tables, the mean AUC at each π and each table's mean."""
    from benchmark.summary import suite_figure

    # a biased labeling's tasks differ from SCAR's: its own results and cache
    suite_dir = where / ("dev_suite" if labeling == SCAR else f"dev_suite_{labeling}")
    command = [str(BIN / "puicl-bench"), "--suite", "dev", "--methods", "puicl",
               "--weights", str(weights), "--repeats", str(repeats), "--jobs", "1",
               "--out", str(suite_dir), "--no-progress"]
    if labeling != SCAR:
        command += ["--labeling", labeling]
    if settings:
        settings_path = where / "dev_settings.yaml"
        atomic_write_text(settings_path, yaml.safe_dump({"puicl": settings}))
        command += ["--method-config", str(settings_path)]
    run(command, where / "log.txt")
    import pandas as pd

    per_table = pd.read_csv(suite_dir / "per_table.csv")
    mean, se = suite_figure(per_table, "puicl")
    by_pi = per_table.groupby("pi_target")["auc"].mean()
    by_table = per_table.groupby("dataset")["auc"].mean()
    return {"dev_auc": mean, "dev_se": se,
            "dev_by_pi": {f"{pi:g}": round(float(v), 4) for pi, v in by_pi.items()},
            "dev_per_table": {k: round(float(v), 4) for k, v in by_table.items()}}


def labeling_scores(plan: dict[str, Any], weights: Path, where: Path,
                    settings: dict[str, Any] | None,
                    done: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The dev suite under each of the plan's ``dev_labelings`` not already in ``done``: the
    same π, repetitions and ``settings`` as the variant's SCAR figure, so that the two pair."""
    repeats = int(plan.get("dev_repeats", DEV_REPEATS))
    return {labeling: dev_suite_score(weights, where, settings, repeats, labeling)
            for labeling in plan.get("dev_labelings") or [] if labeling not in (done or {})}


def scored_variant(name: str, out: Path, option: str) -> tuple[Path, Path, dict[str, Any]]:
    """A trained and scored variant's folder, summary path and summary; ``option`` (the
    command-line option asking for it) names what failed when either is missing."""
    where = out / name
    path = where / "summary.json"
    if not path.exists():
        raise SystemExit(f"{option} {name}: no {path}; train and score the variant first")
    if not (where / "weights").exists():
        raise SystemExit(f"{option} {name}: no exported weights at {where / 'weights'}")
    return where, path, json.loads(path.read_text())


def scored_settings(suite_dir: Path) -> dict[str, Any] | None:
    """The PUICL settings a yardstick's results were computed with, read from each π's
    ``provenance.json`` (the weights' digest left out); None where a π lacks the record or
    the π disagree."""
    found = []
    for provenance in sorted(suite_dir.glob("pi_*/provenance.json")):
        settings = dict(json.loads(provenance.read_text())["method_settings"]["puicl"])
        settings.pop("weights_sha256", None)
        found.append(settings)
    if not found or any(settings != found[0] for settings in found):
        return None
    return found[0]


def planned_settings(plan: dict[str, Any]) -> dict[str, Any]:
    """The PUICL settings the plan's ``dev_settings`` give with the current classifier defaults, as
    a yardstick's provenance records them, less the weights' digest."""
    from benchmark.methods import puicl_settings
    from benchmark.methods.puicl import PUICLConfig
    from puicl_common.configio import from_mapping

    return puicl_settings(from_mapping(PUICLConfig, dict(plan.get("dev_settings") or {}),
                                       path="puicl"))


def align_settings(plan: dict[str, Any], name: str, out: Path) -> list[str]:
    """Score a trained variant's yardsticks again wherever they were computed with other
    settings than the plan's ``dev_settings`` give with the current defaults (a classifier
    default that changed between variants), and record the plan's settings in its summary;
    returns the yardsticks scored again ("scar" and the labelings)."""
    where, path, summary = scored_variant(name, out, "--align-settings")
    wanted = planned_settings(plan)
    recorded = plan.get("dev_settings") or {}
    settings = recorded or None
    repeats = int(plan.get("dev_repeats", DEV_REPEATS))
    redone = []
    if scored_settings(where / "dev_suite") != wanted:
        summary.update(dev_suite_score(where / "weights", where, settings, repeats))
        redone.append(SCAR)
    by_labeling = dict(summary.get("dev_by_labeling") or {})
    for labeling in by_labeling:
        if scored_settings(where / f"dev_suite_{labeling}") != wanted:
            by_labeling[labeling] = dev_suite_score(where / "weights", where, settings, repeats,
                                                    labeling)
            redone.append(labeling)
    if by_labeling:
        summary["dev_by_labeling"] = by_labeling
    if redone or summary.get("dev_settings") != recorded:
        summary["dev_settings"] = recorded
        atomic_write_json(path, summary)
    return redone


# ---------------------------------------------------------------------------- a variant ---
def write_config(plan: dict[str, Any], name: str, out: Path) -> tuple[Path, dict[str, Any]]:
    config = variant_config(plan, name)
    where = out / name
    where.mkdir(parents=True, exist_ok=True)
    config_path = where / "config.yaml"
    atomic_write_text(config_path, yaml.safe_dump(config, sort_keys=False))
    return config_path, config


def generate_shards(config_path: Path, config: dict[str, Any], out: Path, log: Path) -> Path:
    """The variant's train shards, shared with every variant of the same prior and curriculum
    (prior-gen skips steps already written)."""
    shards = out / "shards" / generation_key(config)
    shards.parent.mkdir(parents=True, exist_ok=True)
    # Two variants started side by side share these shards. prior-gen refuses a second writer
    # even when every shard is already there, so the sweeps take turns here instead of one
    # failing: the second waits, then finds nothing left to write.
    with (shards.parent / f"{shards.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run([str(BIN / "prior-gen"), "--config", str(config_path), "--stages", "all",
             "--out", str(shards), "--workers", "2"], log)
    return shards


def newest_checkpoint_step(run_dir: Path) -> int:
    """The step of the run's newest checkpoint (0 before the first)."""
    steps = [int(p.stem.split("_")[-1]) for p in (run_dir / "checkpoints").glob("step_*.pt")]
    return max(steps, default=0)


def train_segment(where: Path, command: list[str], log: Path) -> tuple[float, float]:
    """Run one training segment; returns the run's CPU and wall seconds over all its segments.

    Each segment's cost is appended to ``segments.json``, so that a variant trained in several
    time-limited segments (``--time-limit``) is charged for all of them, not the last."""
    started = time.perf_counter()
    cpu = run(command, log)
    ledger = where / "segments.json"
    segments = json.loads(ledger.read_text()) if ledger.exists() else []
    segments.append({"cpu_s": cpu, "wall_s": time.perf_counter() - started,
                     "until_step": newest_checkpoint_step(where / "run"),
                     "date": time.strftime("%Y-%m-%d %H:%M")})
    atomic_write_json(ledger, segments)
    return sum(s["cpu_s"] for s in segments), sum(s["wall_s"] for s in segments)


def train_variant(plan: dict[str, Any], name: str, out: Path, threads: int,
                  time_limit: float | None = None) -> dict[str, Any] | None:
    """Train, export and score one variant; ``None`` when a time-limited segment ended before
    the run's last step (run the same command again to continue it, bit for bit)."""
    config_path, config = write_config(plan, name, out)
    where = out / name
    log = where / "log.txt"
    shards = generate_shards(config_path, config, out, log)
    command = [str(BIN / "python"), "trainer/main.py", "--config", str(config_path),
               "--shards", str(shards), "--run-dir", str(where / "run"),
               "--threads", str(threads)]
    if time_limit is not None:
        command += ["--time-limit", f"{time_limit:g}"]
    train_cpu, train_wall = train_segment(where, command, log)
    total_steps = variant_steps(plan, name)
    reached = newest_checkpoint_step(where / "run")
    if reached < total_steps:
        print(f"{name}: the segment ended at step {reached} of {total_steps}; run the same "
              "command again to continue", flush=True)
        return None
    run([str(BIN / "trainer"), "export", str(where / "run"), "--out", str(where / "weights")], log)
    # A plan may fix the classifier settings of its yardstick (``dev_settings``), so that
    # variants trained on other days are scored as the first ones were, whatever today's
    # defaults are.
    dev = dev_suite_score(where / "weights", where, plan.get("dev_settings"),
                          int(plan.get("dev_repeats", DEV_REPEATS)))
    # absent from a plan without dev_labelings, so that its summaries keep their fields
    if plan.get("dev_labelings"):
        dev["dev_by_labeling"] = labeling_scores(plan, where / "weights", where,
                                                 plan.get("dev_settings"))

    tasks = load_fixed_val(out / "val_paper_prior")  # written by --generate-only
    torch.set_num_threads(threads)
    curve = []
    kept = sorted(int(p.stem.split("_")[-1]) for p in (where / "run" / "checkpoints")
                  .glob("step_*.pt"))
    steps_done = kept[-4:]
    steps = config["curriculum"]["stages"] * config["curriculum"]["steps_per_stage"] \
        + config["curriculum"]["tail_steps"]
    for step in steps_done:
        model, _ = exported_model(where / "run", step)
        curve.append({"step": step, "cpu_minutes": train_cpu / 60 * step / steps,
                      **val_scores(model, tasks)})
    final = curve[-1]  # the newest checkpoint is the run's last step: ``model`` is its export
    summary = {
        "variant": name,
        "set": (plan["variants"][name] or {}).get("set") or {},
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "tasks": steps * config["curriculum"]["global_batch"],
        "train_cpu_minutes": train_cpu / 60,
        "train_wall_minutes": train_wall / 60,
        # per CPU-second of the training process: wall time depends on what else runs
        "tasks_per_cpu_s": steps * config["curriculum"]["global_batch"] / train_cpu,
        "val_auc": final["val_auc"], "val_accuracy": final["val_accuracy"],
        "val_loss": final["val_loss"],
        **dev,
        "dev_settings": plan.get("dev_settings") or {},
        "curve": curve,
        "threads": threads,
        "cpu": _cpu_model(),
        "date": time.strftime("%Y-%m-%d"),
    }
    atomic_write_json(where / "summary.json", summary)
    return summary


def dev_curve(plan: dict[str, Any], name: str, out: Path) -> list[dict[str, Any]]:
    """The dev-suite figure at each checkpoint of a trained variant's validation curve, with
    the plan's yardstick settings, added to the curve's points in its summary: how the figure
    that decides moves with training CPU. The last point is the variant's own score; the
    others export their checkpoint's EMA weights under ``curve/step_<N>/`` and score them
    there (puicl-bench's cache makes a second call free). A checkpoint within 1 % of the steps
    of the last (one a time limit wrote just before the end) is left unscored: it would repeat
    the last point."""
    where, path, summary = scored_variant(name, out, "--dev-curve")
    repeats = int(plan.get("dev_repeats", DEV_REPEATS))
    last = max(point["step"] for point in summary["curve"])
    for point in summary["curve"]:
        if point["step"] == last:
            point.update({k: summary[k] for k in DEV_FIELDS if k in summary})
            continue
        if last - point["step"] < 0.01 * last:
            continue
        here = where / "curve" / f"step_{point['step']}"
        if not (here / "weights").exists():
            run([str(BIN / "trainer"), "export", str(where / "run"), "--out",
                 str(here / "weights"), "--step", str(point["step"])], where / "log.txt")
        point.update(dev_suite_score(here / "weights", here, plan.get("dev_settings"), repeats))
    atomic_write_json(path, summary)
    return summary["curve"]


def score_reference(name: str, weights: Path, out: Path, threads: int) -> dict[str, Any]:
    """Both yardsticks for weights trained elsewhere (e.g. the bundled v0 checkpoint)."""
    from puicl_model.net.weights import load_weights

    where = out / name
    where.mkdir(parents=True, exist_ok=True)
    val_dir = fixed_val_dir(out, where / "log.txt")  # quick when it is already written
    dev = dev_suite_score(weights, where)
    torch.set_num_threads(threads)
    model = load_weights(weights)
    summary = {"variant": name, "weights": str(weights),
               "parameters": sum(p.numel() for p in model.parameters()),
               **val_scores(model, load_fixed_val(val_dir)), **dev,
               "cpu": _cpu_model(), "date": time.strftime("%Y-%m-%d")}
    atomic_write_json(where / "reference.json", summary)
    return summary


def rescore(plan: dict[str, Any], name: str, out: Path) -> dict[str, dict[str, Any]]:
    """Score a trained variant's exported weights under the plan's ``dev_labelings`` that its
    summary lacks and add them to its ``dev_by_labeling`` (the summary rewritten atomically,
    its other fields as they were); returns what was added. The settings are those its
    summary records for its SCAR figure, so that the two yardsticks pair."""
    where, path, summary = scored_variant(name, out, "--rescore")
    done = summary.get("dev_by_labeling") or {}
    settings = summary.get("dev_settings", plan.get("dev_settings")) or None
    added = labeling_scores(plan, where / "weights", where, settings, done)
    if added:
        summary["dev_by_labeling"] = {**done, **added}
        atomic_write_json(path, summary)
    return added


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


# ---------------------------------------------------------------------------- reporting ---
def summaries(plan: dict[str, Any], out: Path, stored: Path | None = None) -> list[dict[str, Any]]:
    """The scored variants' summaries, in the plan's order: ``out/<variant>/summary.json``, or
    ``stored/<variant>.json`` (the copies committed under docs/recipe/summaries/)."""
    found = []
    for name in plan["variants"]:
        path = stored / f"{name}.json" if stored else out / name / "summary.json"
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


def seed_noise(plan: dict[str, Any], rows: list[dict[str, Any]]) -> float | None:
    """The plan's measured noise: the dev-suite difference between the two seeds of one
    variant (``noise: [variant, variant_seed1]``), or None until both are scored."""
    pair = plan.get("noise") or []
    found = {r["variant"]: r for r in rows if "dev_auc" in r}
    if len(pair) != 2 or not all(name in found for name in pair):
        return None
    return abs(found[pair[0]]["dev_auc"] - found[pair[1]]["dev_auc"])


def paired_stats(row: dict[str, Any], reference: dict[str, Any]) -> tuple[float, float]:
    """The mean of ``row``'s per-table dev-suite differences from ``reference``, and its
    standard error."""
    diffs = [row["dev_per_table"][k] - v for k, v in reference["dev_per_table"].items()
             if k in row["dev_per_table"]]
    se = float(np.std(diffs, ddof=1) / np.sqrt(len(diffs))) if len(diffs) > 1 else 0.0
    return float(np.mean(diffs)), se


def paired_difference(row: dict[str, Any], reference: dict[str, Any]) -> tuple[str, str]:
    """``row``'s dev-suite difference from ``reference``: the mean of the per-table
    differences with its standard error, and the difference of the means at each π."""
    mean, se = paired_stats(row, reference)
    delta = f"{mean:+.4f} ± {se:.4f}"
    # the bar also asks what a variant loses at any single π: the difference of the π's means
    # (the same tables and repetitions on both sides)
    mine = row.get("dev_by_pi", {})
    by_pi = " / ".join(f"{mine[pi] - v:+.4f}"
                       for pi, v in reference.get("dev_by_pi", {}).items() if pi in mine)
    return delta, by_pi or "–"


def base_variant(plan: dict[str, Any], base: str | None = None) -> str:
    """The variant differences are paired with: ``base``, else the plan's ``base_variant``,
    else its first variant."""
    return base or plan.get("base_variant") or next(iter(plan["variants"]))


def scored_row(rows: list[dict[str, Any]], name: str | None) -> dict[str, Any] | None:
    """``name``'s row where it has a dev-suite figure, else None."""
    return next((r for r in rows if r["variant"] == name and "dev_auc" in r), None)


def table(rows: list[dict[str, Any]], base: str | None = None,
          noise: float | None = None, yardstick: str = "dev-suite") -> str:
    """The study's table: each variant's dev-suite figure and its difference from ``base``,
    paired by table, with the seed noise next to it. Summaries written before the suite was
    the yardstick have no dev-suite figure and show a dash."""
    reference = scored_row(rows, base)
    noise_text = "not measured" if noise is None else f"{noise:.4f}"
    lines = [
        "| variant | parameters | steps | tasks | CPU-min | tasks / CPU-s | val AUC | "
        f"{yardstick} AUC ± SE | Δ vs {base or 'base'} ± SE (seed noise {noise_text}) | "
        "Δ at π = 0.2 / 0.5 / 0.8 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        dev = f"{r['dev_auc']:.4f} ± {r['dev_se']:.4f}" if "dev_auc" in r else "–"
        delta = by_pi = "–"
        if reference is not None and "dev_auc" in r and r is not reference:
            delta, by_pi = paired_difference(r, reference)
        lines.append(
            f"| {r['variant']} | {r['parameters']:,} | {r['steps']:,} | {r['tasks']:,} | "
            f"{r['train_cpu_minutes']:.1f} | {_rate(r):.1f} | {r['val_auc']:.4f} | {dev} | "
            f"{delta} | {by_pi} |"
        )
    return "\n".join(lines)


def under_labeling(rows: list[dict[str, Any]], labeling: str) -> list[dict[str, Any]]:
    """The rows with their dev-suite fields read from ``dev_by_labeling[labeling]`` (none where
    a variant is not scored under it, so that the table shows a dash)."""
    views = []
    for row in rows:
        view = {k: v for k, v in row.items() if k not in DEV_FIELDS}
        view.update((row.get("dev_by_labeling") or {}).get(labeling, {}))
        views.append(view)
    return views


def tables(plan: dict[str, Any], rows: list[dict[str, Any]], base: str | None = None) -> str:
    """The SCAR table, then one per biased labeling that any variant is scored under, each
    with its differences from ``base`` (default: the plan's) and the seed noise measured
    under it."""
    base = base_variant(plan, base)
    parts = [table(rows, base, seed_noise(plan, rows))]
    scored = {m for r in rows for m in r.get("dev_by_labeling") or {}}
    for labeling in (m for m in LABELINGS if m in scored):
        views = under_labeling(rows, labeling)
        parts.append(f"Labeled positives drawn by `{labeling}` (`puicl-bench --labeling "
                     f"{labeling}`):\n\n"
                     + table(views, base, seed_noise(plan, views), f"dev-suite {labeling}"))
    return "\n\n".join(parts)


def _rate(row: dict[str, Any]) -> float:
    return row.get("tasks_per_cpu_s") or row["tasks"] / (60 * row["train_cpu_minutes"])


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def figure(rows: list[dict[str, Any]], path: Path, names: list[str] | None,
           field: str = "val_auc") -> None:
    """``field`` of each variant's curve points against training CPU-minutes: the validation
    AUC (every point), or the dev-suite AUC (the points ``--dev-curve`` scored)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        points = [p for p in r.get("curve", []) if field in p]
        if len(points) < 2 or (names and r["variant"] not in names):
            continue
        ax.plot([p["cpu_minutes"] for p in points], [p[field] for p in points],
                marker="o", label=f"{r['variant']} ({r['parameters']:,} parameters)")
    ax.set_xlabel("training CPU-minutes (process user + system time / 60; linear in steps)")
    ax.set_ylabel({"val_auc": "validation AUC (paper prior, 192 tasks)",
                   "dev_auc": "dev-suite AUC (40 tables × 2 repetitions × 3 π)"}[field])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def delta_figure(plan: dict[str, Any], rows: list[dict[str, Any]], path: Path,
                 base: str | None = None) -> None:
    """Each scored variant's dev-suite difference from ``base`` (default: the plan's), paired
    by table, ± one standard error; the band of the plan's seed noise around 0 and, where the
    plan names its ``bar``, that difference as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = base_variant(plan, base)
    reference = scored_row(rows, base)
    if reference is None:
        raise ValueError(f"--delta-figure: the base {base} has no dev-suite score")
    others = [r for r in rows if "dev_auc" in r and r is not reference]
    stats = [paired_stats(r, reference) for r in others]
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.32 * len(others)))
    ys = np.arange(len(others))[::-1]
    ax.errorbar([m for m, _ in stats], ys, xerr=[se for _, se in stats], fmt="o", capsize=3)
    noise = seed_noise(plan, rows)
    if noise is not None:
        ax.axvspan(-noise, noise, color="grey", alpha=0.25, label=f"seed noise ±{noise:.4f}")
    ax.axvline(0.0, color="black", linewidth=0.8)
    if plan.get("bar") is not None:
        bar = float(plan["bar"])
        ax.axvline(bar, color="tab:red", linestyle="--", label=f"bar +{bar:.3f}")
    ax.set_yticks(ys, [r["variant"] for r in others], fontsize=8)
    ax.set_xlabel(f"dev-suite AUC − {base} (paired by table, ± 1 SE)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", help="variants of the plan to train and score")
    parser.add_argument("--plan", type=Path, default=ROOT / "configs/recipe_study/plan.yaml")
    parser.add_argument("--out", type=Path, default=ROOT / "runs/recipe")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the training process (1: two variants at once "
                        "on a 2-core machine, each as fast as one 2-thread run)")
    parser.add_argument("--time-limit", type=float, metavar="MINUTES",
                        help="end each variant's training segment with a checkpoint before "
                        "MINUTES (the trainer's --time-limit); the same command continues it")
    parser.add_argument("--generate-only", action="store_true",
                        help="write the variants' configs and shards (and the fixed validation "
                        "split) and stop: run this before training variants side by side, so "
                        "that no two processes write one shard directory")
    parser.add_argument("--table", action="store_true", help="print the table of the results")
    parser.add_argument("--base", metavar="VARIANT",
                        help="the variant --table pairs every difference with (default: the "
                        "plan's base_variant), e.g. one scored under a labeling the base lacks")
    parser.add_argument("--figure", type=Path, help="draw validation AUC vs CPU-minutes here")
    parser.add_argument("--figure-variants", help="comma-separated variants for the figure")
    parser.add_argument("--delta-figure", type=Path,
                        help="draw each variant's paired dev-suite difference from the base "
                        "(--base, default the plan's) with the seed noise and the plan's bar")
    parser.add_argument("--dev-curve", metavar="VARIANT", action="append", default=[],
                        help="score the dev suite at each checkpoint of a trained variant's "
                        "validation curve and add it to its summary (no training; repeatable)")
    parser.add_argument("--dev-curve-figure", type=Path,
                        help="draw dev-suite AUC vs CPU-minutes of the variants with such a curve")
    parser.add_argument("--summaries", type=Path, metavar="DIR",
                        help="read the summaries for --table and the figures from DIR/<variant>"
                        ".json (the committed copies) instead of --out")
    parser.add_argument("--print-config", action="store_true",
                        help="print the variants' run configs and stop")
    parser.add_argument("--reference", metavar="NAME=WEIGHTS",
                        help="score weights trained elsewhere on both yardsticks and stop")
    parser.add_argument("--rescore", metavar="VARIANT", action="append", default=[],
                        help="score a trained variant's exported weights under the plan's "
                        "dev_labelings that its summary lacks, and add them to it (no "
                        "training; repeatable)")
    parser.add_argument("--align-settings", metavar="VARIANT", action="append", default=[],
                        help="score a trained variant's yardsticks again where their results "
                        "were computed with other classifier settings than the plan's "
                        "dev_settings give with the current defaults, and record those in "
                        "its summary (no training; repeatable)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    plan = load_plan(args.plan)
    if args.reference:
        name, _, weights = args.reference.partition("=")
        found = score_reference(name, Path(weights), args.out, args.threads)
        print(json.dumps({k: v for k, v in found.items() if k != "bench_per_dataset"}))
        return 0
    unknown = [v for v in args.variants + args.rescore + args.align_settings + args.dev_curve
               + ([args.base] if args.base else []) if v not in plan["variants"]]
    if unknown:
        parser.error(f"not in {args.plan}: {', '.join(unknown)}")
    if (args.rescore or args.align_settings or args.dev_curve) and args.variants:
        parser.error("give variants to train, or --rescore / --align-settings / --dev-curve, "
                     "not both")
    for name in args.dev_curve:
        for point in (p for p in dev_curve(plan, name, args.out) if "dev_auc" in p):
            print(f"{name}: step {point['step']}, {point['cpu_minutes']:.1f} CPU-min: "
                  f"dev-suite AUC {point['dev_auc']:.4f}", flush=True)
    for name in args.align_settings:
        redone = align_settings(plan, name, args.out)
        print(f"{name}: scored again: {', '.join(redone)}" if redone
              else f"{name}: every yardstick already has the plan's settings", flush=True)
    if args.rescore and not plan.get("dev_labelings"):
        parser.error(f"--rescore: {args.plan} lists no dev_labelings to score")
    for name in args.rescore:
        added = rescore(plan, name, args.out)
        for labeling, dev in added.items():
            print(f"{name}: dev-suite AUC under {labeling} {dev['dev_auc']:.4f}", flush=True)
        if not added:
            print(f"{name}: already scored under every dev_labelings mechanism", flush=True)
    for name in args.variants:
        if args.generate_only:
            config_path, config = write_config(plan, name, args.out)
            log = args.out / name / "log.txt"
            generate_shards(config_path, config, args.out, log)
            fixed_val_dir(args.out, log)
            continue
        if args.print_config:
            print(f"# {name}: {variant_steps(plan, name)} steps")
            print(yaml.safe_dump(variant_config(plan, name), sort_keys=False))
            continue
        summary = train_variant(plan, name, args.out, args.threads, args.time_limit)
        if summary is None:
            continue
        print(f"{name}: val AUC {summary['val_auc']:.4f}, dev-suite AUC {summary['dev_auc']:.4f}, "
              f"{summary['train_cpu_minutes']:.1f} CPU-min", flush=True)
    rows = summaries(plan, args.out, args.summaries)
    names = args.figure_variants.split(",") if args.figure_variants else None
    if args.table:
        print(tables(plan, rows, args.base))
    if args.figure:
        figure(rows, args.figure, names)
    if args.delta_figure:
        delta_figure(plan, rows, args.delta_figure, args.base)
    if args.dev_curve_figure:
        figure(rows, args.dev_curve_figure, names, "dev_auc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
