"""``prior-gen inspect``: the manifest and per-stage statistics of a shard directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prior_gen.paper.seeding import TAIL
from prior_gen.shards.errors import ShardMismatchError
from prior_gen.shards.manifest import MANIFEST_NAME, load_manifest, stage_order, summarize
from prior_gen.shards.reader import ShardReader
from puicl_common.output_paths import save_figure

__all__ = ["inspect_directory", "stage_rows"]


def stage_rows(manifest: dict[str, Any], split: str) -> list[dict[str, Any]]:
    """One row of means per stage of ``split``."""
    curriculum = manifest["config"]["curriculum"]
    stages = curriculum["stages"]
    rows = []
    summary = summarize(manifest).get(split, {})
    for key in sorted(summary, key=stage_order):
        stats = summary[key]
        n = max(stats.get("tasks", 0), 1)
        s = stages if key == TAIL else int(key)
        rows.append(
            {
                "stage": key,
                "steps": int(stats["steps"]),
                "tasks": int(stats.get("tasks", 0)),
                "rows": stats.get("rows", 0) / n,
                "features": stats.get("features", 0) / n,
                "labeled": stats.get("labeled", 0) / n,
                "pi": stats.get("pi", 0) / n,
                "realized_pi": stats.get("realized_pi", 0) / n,
                "pi_min": stats.get("realized_pi_min", 0.0),
                "pi_max": stats.get("realized_pi_max", 0.0),
                "eta": stats.get("realized_eta", 0) / n,
                "causal": stats.get("causal", 0) / n,
                "causal_expected": curriculum["causal_final"] * s / stages,
                "bytes_per_task": stats["bytes"] / n,
                "raw_bytes_per_task": stats.get("raw_bytes", 0) / n,
                "redraws": int(stats.get("redraws", 0)),
            }
        )
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'stage':>6} {'steps':>6} {'tasks':>8} {'rows':>7} {'feat':>5} {'P':>6} "
        f"{'pi':>6} {'pi(real)':>8} {'min-max':>11} {'eta':>5} {'causal':>6} {'s/2K':>5} "
        f"{'B/task':>8} {'ratio':>5}"
    )
    print(header)
    for r in rows:
        ratio = r["bytes_per_task"] / r["raw_bytes_per_task"] if r["raw_bytes_per_task"] else 0.0
        print(
            f"{r['stage']:>6} {r['steps']:>6} {r['tasks']:>8} {r['rows']:>7.1f} "
            f"{r['features']:>5.1f} {r['labeled']:>6.1f} {r['pi']:>6.3f} {r['realized_pi']:>8.3f} "
            f"{r['pi_min']:>5.2f}-{r['pi_max']:<5.2f} {r['eta']:>5.2f} {r['causal']:>6.3f} "
            f"{r['causal_expected']:>5.3f} {r['bytes_per_task']:>8.0f} {ratio:>5.2f}"
        )


def plot_stats(manifest: dict[str, Any], splits: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    panels = [
        ("realized π (mean, min–max)", "realized_pi"),
        ("η = n_u / P (mean)", "eta"),
        ("causal share vs s/(2K)", "causal"),
        ("rows per task (mean)", "rows"),
        ("features per task (mean)", "features"),
        ("stored bytes per task", "bytes_per_task"),
    ]
    curriculum = manifest["config"]["curriculum"]
    stages = curriculum["stages"]
    tail_x = stages + max(1, stages // 10)  # the tail, drawn a little after stage K
    for split in splits:
        rows = stage_rows(manifest, split)
        if not rows:
            continue
        xs = [tail_x if r["stage"] == TAIL else int(r["stage"]) for r in rows]
        for ax, (title, key) in zip(axes.flat, panels, strict=True):
            ax.plot(xs, [r[key] for r in rows], marker=".", label=split)
            if key == "realized_pi":
                low, high = [r["pi_min"] for r in rows], [r["pi_max"] for r in rows]
                ax.fill_between(xs, low, high, alpha=0.2)
            ax.set_title(title)
    xs = [*range(1, stages + 1), tail_x]  # the tail anneals as stage K
    expected = [min(s, stages) / stages * curriculum["causal_final"] for s in xs]
    axes.flat[2].plot(xs, expected, "k--", lw=1, label="s/(2K)")
    ticks = sorted({1, *range(0, stages + 1, max(1, stages // 5))} - {0})
    for ax in axes.flat:
        ax.set_xticks([*ticks, tail_x], [*map(str, ticks), TAIL])
        ax.set_xlabel("stage")
        ax.legend(fontsize=7)
    fig.suptitle(f"prior shards: config {manifest['config_hash'][:12]}, seed {manifest['seed']}")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def inspect_directory(directory: Path, split: str | None, plot: str | None, verify: bool) -> int:
    manifest = load_manifest(directory)
    if manifest is None:
        raise ShardMismatchError(f"{directory / MANIFEST_NAME} not found: not a shard directory")
    splits = [split] if split else sorted(manifest["splits"])
    if split and split not in manifest["splits"]:
        raise ShardMismatchError(f"{directory} has no {split!r} split")
    curriculum = manifest["config"]["curriculum"]
    print(f"shard directory   {directory}")
    print(
        f"format            {manifest['format']} (shard format v{manifest['format_version']}, "
        f"puicl {manifest['package_version']})"
    )
    print(f"config            {manifest.get('config_path')}  hash {manifest['config_hash']}")
    print(f"seed              {manifest['seed']}")
    print(
        f"curriculum        {curriculum['stages']} stages × {curriculum['steps_per_stage']} steps "
        f"+ {curriculum['tail_steps']} tail steps, {manifest['global_batch']} tasks per step"
    )
    shards = manifest["shards"]
    print(
        f"shards            {shards['steps_per_shard']} steps per shard, blosc "
        f"{shards['compressor']} level {shards['level']}, {shards['shuffle']} shuffle"
    )
    print(f"updated           {manifest.get('updated')}")
    status = 0
    for name in splits:
        rows = stage_rows(manifest, name)
        tasks = sum(r["tasks"] for r in rows)
        stored = sum(r["bytes_per_task"] * r["tasks"] for r in rows)
        print(f"\nsplit {name}: {len(rows)} stages, {tasks} tasks, {stored / 1e6:.1f} MB")
        _print_table(rows)
        reader = ShardReader(directory, manifest, name)
        heading = "verify" if verify else "check"
        if verify:
            bad, problem = reader.verify(), "missing or damaged"
            fine = "verify: every shard matches its sha256"
        else:
            # without --verify only sizes are checked; say so, so that a clean report is not
            # mistaken for verified contents
            bad, problem = reader.check_sizes(), "missing or of the wrong size"
            fine = ("check: every shard is present with its recorded size; contents were not "
                    "verified (--verify re-hashes every shard)")
        if bad:
            status = 1
            print(f"{heading}: {len(bad)} shard(s) {problem}:")
            for path in bad:
                print(f"  {path}")
        else:
            print(fine)
    if plot:
        plot_stats(manifest, splits, Path(plot))
        print(f"\nplot saved to {plot}")
    return status
