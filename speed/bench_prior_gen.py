"""Benchmark of the prior generator (figures for docs/performance.md, "Prior generator").

    .venv/bin/python -m speed.bench_prior_gen [--config configs/paper.yaml] [--quick]
                                                   [--json results/bench_prior_gen.json]
                                                   [--arithmetic native|portable]
                                                   [--compare arithmetic|noise_sampler]
                                                   [--against OTHER_CONFIG]

Measures, on one core (BLAS limited to one thread) unless said otherwise:

* tasks/s per core at stages 1, 50, 100 — generation alone, and generation + writing a shard
  in each format — and, side by side on the same plans (interleaved step by step), the other
  ``prior.scm.arithmetic`` (native vs portable; ``--compare noise_sampler``: the other
  ``prior.scm.noise_sampler``, box_muller vs table) and a plain per-task numpy generator
  (``Generator.standard_normal``, one task at a time) as the baseline the design is measured
  against; ``--arithmetic`` overrides the config's arithmetic;
* the speed-up from 1 to 2 worker processes (``run_generation``, wall clock, same jobs);
* bytes per task and compression ratio of both formats, and of the candidate Blosc codecs;
* the time to read one stored step (warm: shard already open; cold: opened first) against the
  time to generate it;
* a projection of the paper's full run (4.8 M tasks) on a 16-core node: per-task cost averaged
  over a sample of stages and the tail, weighted by their share of the run.

``--against OTHER_CONFIG`` measures only generation, side by side (interleaved step by step)
against another config with the same curriculum stages, at stages 1, K/2, K and the tail: tasks/s,
rows per task and table cells (rows × features) per second; when the config has
``prior.dataset.categorical``, the same config without it is timed too (the discretisation's
cost).

Every timing is the minimum over ``--repeats`` runs (CPU time of this process for one-core
figures, wall time for the worker comparison), so other load on a shared machine inflates them
less; ratios are measured side by side in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from prior_gen.config import GenerationConfig, load_generation_config
from prior_gen.generate import generate_step
from prior_gen.paper.factors import TaskPlan, n_negatives, plan_step
from prior_gen.runner import ShardJob, run_generation, write_shard
from prior_gen.shards import open_shards

REPO = Path(__file__).resolve().parents[1]


def _min_time(function: Callable[[], Any], repeats: int,
              clock: Callable[[], float] = time.perf_counter) -> float:
    best = math.inf
    for _ in range(repeats):
        start = clock()
        function()
        best = min(best, clock() - start)
    return best


def _cpu_min(function: Callable[[], Any], repeats: int) -> float:
    return _min_time(function, repeats, time.process_time)


def _wall_min(function: Callable[[], Any], repeats: int) -> float:
    return _min_time(function, repeats)


# -- the baseline: one task at a time, numpy's own normal sampler ------------------------------
def _baseline_task(plan: TaskPlan, init_std: float, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """A straightforward implementation of the same SCM + PU construction, task by task."""
    import scipy.special

    rng = plan.rng
    k, h, d, n = plan.n_causes, plan.width, plan.n_features, plan.n_rows
    f32 = np.float32
    causes = (
        rng.standard_normal((n, k), dtype=f32)
        if plan.cause_dist == "normal"
        else rng.random((n, k), dtype=f32)
    )
    hidden = causes @ (rng.standard_normal((k, h), dtype=f32) * f32(init_std))
    functions = {
        "tanh": np.tanh,
        "relu": lambda v: np.maximum(v, 0),
        "gelu": lambda v: v * scipy.special.ndtr(v),
        "identity": lambda v: v,
        "sign": np.sign,
        "heaviside": lambda v: (v > 0).astype(f32),
        "rbf": lambda v: np.exp(-v * v),
        "sine": np.sin,
        "square": np.square,
        "abs": np.abs,
    }
    blocks = []
    with np.errstate(all="ignore"):
        for name in plan.activations:
            weights = rng.standard_normal((h, h), dtype=f32) * f32(init_std)
            hidden = functions[name](hidden) @ weights
            hidden += rng.standard_normal(hidden.shape, dtype=f32) * f32(plan.noise_std)
            blocks.append(hidden)
        if plan.causal:
            pool = np.concatenate(blocks, axis=1)
            nodes = rng.permutation(pool.shape[1])[: d + 1]
            x, score = pool[:, nodes[1:]], pool[:, nodes[0]]
        else:
            x = hidden @ rng.standard_normal((h, d), dtype=f32)
            score = hidden @ rng.standard_normal(h, dtype=f32)
        x = np.clip((x - x.mean(0)) / np.maximum(x.std(0), 1e-6), -clip, clip)
        score = np.clip((score - score.mean()) / max(score.std(), 1e-6), -clip, clip)
    labels = np.ones(n, np.int8)
    labels[np.argsort(score)[n - n_negatives(n, plan.pi) :]] = 0
    positives = rng.permutation(np.flatnonzero(labels == 1))
    negatives = rng.permutation(np.flatnonzero(labels == 0))
    unlabeled = rng.permutation(
        np.concatenate([positives[plan.n_labeled :], negatives[plan.n_train - plan.n_labeled :]])
    )
    rows = np.concatenate([positives[: plan.n_labeled], unlabeled])
    return x[rows].astype(f32), labels[rows]


def _baseline_step(config: GenerationConfig, stage: Any, step: int) -> None:
    scm = config.prior.scm
    for plan in plan_step(config, "train", stage, step):
        _baseline_task(plan, scm.init_std, scm.clip)


# -- measurements -------------------------------------------------------------------------------
def _with_scm(config: GenerationConfig, **changes: str) -> GenerationConfig:
    scm = dataclasses.replace(config.prior.scm, **changes)
    scm.validate()
    return dataclasses.replace(config, prior=dataclasses.replace(config.prior, scm=scm))


def _other_variant(config: GenerationConfig, key: str) -> GenerationConfig:
    """``config`` with the other value of ``prior.scm.<key>``: arithmetic native <-> portable,
    noise_sampler table <-> box_muller."""
    pairs = {"arithmetic": ("native", "portable"), "noise_sampler": ("table", "box_muller")}
    first, second = pairs[key]
    other = second if getattr(config.prior.scm, key) == first else first
    return _with_scm(config, **{key: other})


def _interleaved_steps(variants: dict[str, Callable[[int], Any]], steps: int, repeats: int):
    """Tasks/s of each variant (a function of the step), timed step by step in turn: the
    minimum CPU time of each (variant, step) over ``repeats`` rounds, summed over the steps.
    Interleaving puts every variant under the same load, so their ratios hold on a busy
    machine even when the absolute figures do not."""
    best = {(name, step): math.inf for name in variants for step in range(steps)}
    for _ in range(repeats):
        for step in range(steps):
            for name, run in variants.items():
                start = time.process_time()
                run(step)
                best[name, step] = min(best[name, step], time.process_time() - start)
    return {name: sum(best[name, step] for step in range(steps)) for name in variants}


def measure_stages(
    config: GenerationConfig, stages: list, steps: int, repeats: int, compare: str
) -> list[dict]:
    batch = config.curriculum.global_batch
    label = getattr(config.prior.scm, compare)
    other = _other_variant(config, compare)
    other_label = getattr(other.prior.scm, compare)
    # one-time costs (noise table, imports of scipy and zarr) stay outside the timings
    for warm_up in (config, other):
        generate_step(warm_up, "train", stages[0], 0)
    _baseline_step(config, stages[0], 0)
    for fmt in ("zarr", "webdataset"):
        shards = dataclasses.replace(config.shards, format=fmt, steps_per_shard=1)
        with tempfile.TemporaryDirectory() as out:
            write_shard(
                dataclasses.replace(config, shards=shards), ShardJob("train", stages[0], 0, 1), out
            )
    rows = []
    for stage in stages:
        tasks = steps * batch
        seconds = _interleaved_steps(
            {
                "generate": lambda step, stage=stage: generate_step(config, "train", stage, step),
                "other": lambda step, stage=stage: generate_step(other, "train", stage, step),
            },
            steps,
            repeats,
        )
        # the baseline separately: its large temporaries would evict the others' caches
        seconds.update(
            _interleaved_steps(
                {"baseline": lambda step, stage=stage: _baseline_step(config, stage, step)},
                steps,
                repeats,
            )
        )
        row: dict[str, Any] = {"stage": stage, compare: label, "other": other_label}
        sample = plan_step(config, "train", stage, 0)[0]
        row["depth"], row["width"] = sample.depth, sample.width
        row["generate_tps"] = tasks / seconds["generate"]
        row["other_tps"] = tasks / seconds["other"]
        row["baseline_tps"] = tasks / seconds["baseline"]
        for fmt in ("zarr", "webdataset"):
            shard_config = dataclasses.replace(config.shards, format=fmt, steps_per_shard=steps)
            fmt_config = dataclasses.replace(config, shards=shard_config)
            job = ShardJob("train", stage, 0, steps)
            records: list[dict] = []

            def write(fmt_config=fmt_config, job=job, records=records) -> None:
                with tempfile.TemporaryDirectory() as out:
                    records.append(write_shard(fmt_config, job, out))

            row[f"write_{fmt}_tps"] = tasks / _cpu_min(write, repeats)
            record = records[-1]
            row[f"bytes_per_task_{fmt}"] = record["bytes"] / record["n_tasks"]
            row[f"ratio_{fmt}"] = record["bytes"] / record["stats"]["raw_bytes"]
        rows.append(row)
        print(
            f"  stage {stage!s:>4} (depth {row['depth']:2d}, width {row['width']:2d}): "
            f"generate {row['generate_tps']:7.0f} tasks/s ({label}; "
            f"{other_label} {row['other_tps']:.0f}, ratio "
            f"{row['generate_tps'] / row['other_tps']:.3f}), "
            f"+zarr {row['write_zarr_tps']:7.0f}, +webdataset {row['write_webdataset_tps']:7.0f}; "
            f"baseline {row['baseline_tps']:6.0f} "
            f"({row['generate_tps'] / row['baseline_tps']:.1f}x)",
            flush=True,
        )
    return rows


def measure_against(
    config: GenerationConfig, other: GenerationConfig, steps: int, repeats: int
) -> list[dict]:
    """Generation alone, ``config`` vs ``other`` (and ``config`` without categorical features
    if it has them), interleaved step by step at stages 1, K/2, K and the tail."""
    stages_k = config.curriculum.stages
    if other.curriculum.stages != stages_k:
        raise SystemExit(
            f"--against: the configs have {stages_k} and {other.curriculum.stages} stages; "
            "the comparison needs the same curriculum stages"
        )
    stages: list[Any] = sorted({1, max(1, stages_k // 2), stages_k})
    if config.curriculum.tail_steps > 0 and other.curriculum.tail_steps > 0:
        stages.append("tail")
    variants = {"config": config, "against": other}
    if config.prior.dataset.categorical is not None:
        dataset = dataclasses.replace(config.prior.dataset, categorical=None)
        variants["no_categorical"] = dataclasses.replace(
            config, prior=dataclasses.replace(config.prior, dataset=dataset)
        )
    for variant in variants.values():  # one-time costs (imports, numba) outside the timings
        generate_step(variant, "train", stages[0], 0)
    rows = []
    for stage in stages:
        seconds = _interleaved_steps(
            {
                name: lambda step, c=variant, stage=stage: generate_step(c, "train", stage, step)
                for name, variant in variants.items()
            },
            steps,
            repeats,
        )
        row: dict[str, Any] = {"stage": stage}
        for name, variant in variants.items():
            tasks = [
                t for step in range(steps) for t in generate_step(variant, "train", stage, step)
            ]
            row[f"{name}_tps"] = len(tasks) / seconds[name]
            row[f"{name}_rows_per_task"] = float(np.mean([t.n_rows for t in tasks]))
            row[f"{name}_cells_per_s"] = sum(t.x.size for t in tasks) / seconds[name]
        rows.append(row)
        extra = (
            f"; without categorical {row['no_categorical_tps']:.0f} tasks/s"
            if "no_categorical" in variants
            else ""
        )
        print(
            f"  stage {stage!s:>4}: {row['config_tps']:6.0f} tasks/s "
            f"({row['config_rows_per_task']:.0f} rows/task, "
            f"{row['config_cells_per_s'] / 1e6:.2f} M cells/s) vs {row['against_tps']:6.0f} "
            f"tasks/s ({row['against_rows_per_task']:.0f} rows/task, "
            f"{row['against_cells_per_s'] / 1e6:.2f} M cells/s): tasks/s ratio "
            f"{row['config_tps'] / row['against_tps']:.3f}{extra}",
            flush=True,
        )
    return rows


def measure_workers(config: GenerationConfig, repeats: int) -> dict[str, float]:
    """Wall time of the same 16 shards with 1 and 2 worker processes (interleaved runs, after
    one untimed run each so that worker start-up is not counted)."""
    small = dataclasses.replace(
        config, shards=dataclasses.replace(config.shards, steps_per_shard=2)
    )
    times: dict[int, float] = {1: math.inf, 2: math.inf}
    tasks = 0
    for attempt in range(repeats + 1):
        for workers in (1, 2):
            with tempfile.TemporaryDirectory() as out:
                start = time.perf_counter()
                summary = run_generation(
                    small, "train", [1, 100], Path(out), steps=(0, 15), workers=workers
                )
                if attempt > 0:
                    times[workers] = min(times[workers], time.perf_counter() - start)
                tasks = summary.tasks_written
    return {
        "tasks": tasks,
        "seconds_1": times[1],
        "seconds_2": times[2],
        "speedup": times[1] / times[2],
    }


def measure_reads(config: GenerationConfig, repeats: int) -> dict[str, float]:
    """ms to read one stored step vs to generate it, both formats: warm = its shard is already
    open (the trainer reads a shard's steps in a row), cold = the shard is opened first."""
    result: dict[str, float] = {}
    stage, steps = 50, 4
    generate = _cpu_min(lambda: generate_step(config, "train", stage, 1), repeats)
    result["generate_step_ms"] = generate * 1e3
    for fmt in ("zarr", "webdataset"):
        shards = dataclasses.replace(config.shards, format=fmt, steps_per_shard=steps)
        with tempfile.TemporaryDirectory() as out:
            run_generation(
                dataclasses.replace(config, shards=shards),
                "train",
                [stage],
                Path(out),
                steps=(0, steps - 1),
            )
            reader = open_shards(out)
            reader.read_step(stage, 0)
            warm = _wall_min(lambda reader=reader: reader.read_step(stage, 1), 5 * repeats)

            def cold(reader=reader) -> None:
                reader.close()  # forget open shards: the read opens the shard first
                reader.read_step(stage, 2)

            cold_time = _wall_min(cold, 5 * repeats)
        result[f"read_warm_{fmt}_ms"] = warm * 1e3
        result[f"read_cold_{fmt}_ms"] = cold_time * 1e3
        result[f"generate_over_read_{fmt}"] = generate / warm
    return result


def measure_codecs(config: GenerationConfig) -> list[dict[str, float]]:
    """Ratio and single-thread speed of Blosc codecs on the x data of real steps."""
    from numcodecs import Blosc

    x = np.concatenate(
        [t.x.reshape(-1) for st in (1, 100) for t in generate_step(config, "train", st, 0)]
    )
    rows = []
    for cname, level, shuffle in [
        ("lz4", 1, Blosc.SHUFFLE),
        ("lz4hc", 1, Blosc.SHUFFLE),
        ("zstd", 1, Blosc.SHUFFLE),
        ("zstd", 1, Blosc.BITSHUFFLE),
        ("zstd", 3, Blosc.BITSHUFFLE),
        ("blosclz", 5, Blosc.SHUFFLE),
    ]:
        codec = Blosc(cname=cname, clevel=level, shuffle=shuffle)
        encoded = codec.encode(x)
        encode = _cpu_min(lambda codec=codec: codec.encode(x), 5)
        decode = _cpu_min(lambda codec=codec, encoded=encoded: codec.decode(encoded), 5)
        rows.append(
            {
                "codec": f"{cname}-{level}-{'bit' if shuffle == Blosc.BITSHUFFLE else 'byte'}",
                "ratio": len(encoded) / x.nbytes,
                "encode_MBps": x.nbytes / encode / 1e6,
                "decode_MBps": x.nbytes / decode / 1e6,
            }
        )
    return rows


def project_full_run(config: GenerationConfig, steps: int, repeats: int, speedup: float) -> dict:
    """Per-task cost (generate + write zarr) over a stage sample and the tail -> 16 cores."""
    curriculum = config.curriculum
    sample = sorted({1, *range(12, curriculum.stages + 1, 11), curriculum.stages})
    batch = curriculum.global_batch
    cost, size = [], []
    for stage in [*sample, "tail"]:
        shards = dataclasses.replace(config.shards, steps_per_shard=steps)
        stage_config = dataclasses.replace(config, shards=shards)
        records: list[dict] = []

        def write(stage=stage, stage_config=stage_config, records=records) -> None:
            with tempfile.TemporaryDirectory() as out:
                records.append(write_shard(stage_config, ShardJob("train", stage, 0, steps), out))

        seconds = _cpu_min(write, repeats)
        cost.append(seconds / (steps * batch))
        size.append(records[-1]["bytes"] / (steps * batch))
    phase1_weight = curriculum.phase1_steps / curriculum.total_steps
    tail_weight = curriculum.tail_steps / curriculum.total_steps
    mean_cost = phase1_weight * float(np.mean(cost[:-1])) + tail_weight * cost[-1]
    mean_size = phase1_weight * float(np.mean(size[:-1])) + tail_weight * size[-1]
    total_tasks = curriculum.total_steps * batch
    efficiency = min(1.0, speedup / 2)  # per-core efficiency seen going from 1 to 2 workers
    per_core = 1 / mean_cost
    return {
        "stages_sampled": [*sample, "tail"],
        "tasks_per_s_per_core": per_core,
        "parallel_efficiency": efficiency,
        "total_tasks": total_tasks,
        "wall_minutes_16_cores": total_tasks / (16 * per_core * efficiency) / 60,
        "wall_minutes_16_cores_ideal": total_tasks / (16 * per_core) / 60,
        "bytes_per_task": mean_size,
        "disk_GB": mean_size * total_tasks / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "paper.yaml"))
    parser.add_argument("--steps", type=int, default=3, help="steps timed per stage")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 step, 1 repeat (a smoke run)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument(
        "--arithmetic",
        choices=("native", "portable"),
        help="prior.scm.arithmetic to measure (default: the config's)",
    )
    parser.add_argument(
        "--compare",
        choices=("arithmetic", "noise_sampler"),
        default="arithmetic",
        help="which prior.scm key the side-by-side variant flips (default: arithmetic)",
    )
    parser.add_argument(
        "--against",
        help="only compare generation with this other config, side by side (see above)",
    )
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 1, 1
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # one core: BLAS must not use the other
    except ImportError:
        pass
    config = load_generation_config(args.config)
    if args.arithmetic:
        config = _with_scm(config, arithmetic=args.arithmetic)
    stages = [s for s in (1, 50, 100) if s <= config.curriculum.stages]
    results: dict[str, Any] = {"config": args.config, "date": time.strftime("%Y-%m-%d")}
    if args.against:
        other = load_generation_config(args.against)
        if args.arithmetic:
            other = _with_scm(other, arithmetic=args.arithmetic)
        print(
            f"generation, {args.config} vs {args.against}, {args.steps} steps per stage, "
            f"minimum CPU time of {args.repeats} interleaved repeats, one core:"
        )
        results["against"] = args.against
        results["stages"] = measure_against(config, other, args.steps, args.repeats)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
        return

    print(f"tasks/s per core, {args.steps} steps of {config.curriculum.global_batch} tasks:")
    results["stages"] = measure_stages(config, stages, args.steps, args.repeats, args.compare)

    def mean(key: str) -> float:  # time-weighted: total tasks / total time
        return len(stages) / sum(1 / r[key] for r in results["stages"])

    mean_rate, mean_write, mean_other = (
        mean("generate_tps"),
        mean("write_zarr_tps"),
        mean("other_tps"),
    )
    results["mean_generate_tps"], results["mean_write_zarr_tps"] = mean_rate, mean_write
    results["mean_other_tps"] = mean_other
    print(
        f"  mean over stages {stages} (time-weighted): generate {mean_rate:.0f} tasks/s "
        f"({mean_rate / mean_other:.3f}x the other {args.compare}'s {mean_other:.0f}), "
        f"generate+zarr {mean_write:.0f} tasks/s"
    )

    workers = measure_workers(config, args.repeats)
    results["workers"] = workers
    print(
        f"1 -> 2 workers ({workers['tasks']} tasks): {workers['seconds_1']:.2f} s -> "
        f"{workers['seconds_2']:.2f} s, speed-up {workers['speedup']:.2f}x"
    )

    reads = measure_reads(config, args.repeats)
    results["reads"] = reads
    for fmt in ("zarr", "webdataset"):
        print(
            f"read one step ({config.curriculum.global_batch} tasks, {fmt}): warm "
            f"{reads[f'read_warm_{fmt}_ms']:.1f} ms, cold {reads[f'read_cold_{fmt}_ms']:.1f} ms;"
            f" generating it: {reads['generate_step_ms']:.0f} ms "
            f"({reads[f'generate_over_read_{fmt}']:.0f}x the warm read)"
        )

    for row in results["stages"]:
        print(
            f"bytes/task at stage {row['stage']}: zarr {row['bytes_per_task_zarr']:.0f} "
            f"(ratio {row['ratio_zarr']:.3f}), webdataset {row['bytes_per_task_webdataset']:.0f} "
            f"(ratio {row['ratio_webdataset']:.3f})"
        )
    results["codecs"] = measure_codecs(config)
    print("Blosc codecs on x (ratio, encode MB/s, decode MB/s):")
    for row in results["codecs"]:
        print(
            f"  {row['codec']:<16} {row['ratio']:.3f} {row['encode_MBps']:7.0f} "
            f"{row['decode_MBps']:7.0f}"
        )

    projection = project_full_run(config, args.steps, args.repeats, workers["speedup"])
    results["projection"] = projection
    print(
        f"full run projection ({projection['total_tasks'] / 1e6:.1f} M tasks, stages "
        f"{projection['stages_sampled']}): {projection['tasks_per_s_per_core']:.0f} tasks/s per "
        f"core incl. zarr writing -> {projection['wall_minutes_16_cores_ideal']:.1f} min on 16 "
        f"cores at linear scaling ({projection['wall_minutes_16_cores']:.1f} min at the measured "
        f"1->2 worker efficiency {projection['parallel_efficiency']:.2f}); "
        f"{projection['disk_GB']:.0f} GB on disk ({projection['bytes_per_task']:.0f} B/task)"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
