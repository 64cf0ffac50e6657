"""The curves of a long run trained in segments (scripts/train_segment.sh), from its committed
state: the training loss against the step, and each segment's scores on the two yardsticks of
docs/recipe.md against the training minutes.

    python -m studies.plot_run_curve checkpoints/puicl-v1-run \
        --reference "v0 (bundled)=docs/recipe/summaries/v0_bundled.json" \
        --out docs/model_card/puicl-v1_run.png

The loss panel reads ``metrics.jsonl`` (one train record per logged step; a step logged again
by a resumed segment counts at its last record) and marks where phase 2 starts; the score panel
reads ``scores.jsonl`` (``scripts/segment.py record``). A ``--reference NAME=SUMMARY_JSON`` (a
recipe-study summary or reference.json) is drawn as horizontal lines at its two scores. Prints
the scores as a markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainer.metrics_log import read_metrics

LOSS_SMOOTHING = 0.9  # exponential smoothing of the logged losses, for a readable curve


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        raise SystemExit(f"error: {path} does not exist (is {path.parent} a saved run?)")
    return read_metrics(path)


def train_losses(metrics: list[dict]) -> tuple[list[int], list[float], int | None]:
    """Steps and losses in step order (the last record of a step wins), and phase 2's first
    logged step."""
    by_step = {r["step"]: r for r in metrics if r.get("kind") == "train"}
    steps = sorted(by_step)
    phase2 = next((s for s in steps if by_step[s].get("phase") == 2), None)
    return steps, [by_step[s]["loss"] for s in steps], phase2


def smoothed(values: list[float], weight: float = LOSS_SMOOTHING) -> list[float]:
    out, level = [], values[0] if values else 0.0
    for value in values:
        level = weight * level + (1 - weight) * value
        out.append(level)
    return out


def table(scores: list[dict]) -> str:
    lines = ["| step | training minutes | val AUC | val accuracy | dev AUC |",
             "|---|---|---|---|---|"]
    lines += [f"| {s['step']:,} | {s['training_minutes']:.0f} | {s['val_auc']:.4f} | "
              f"{s['val_accuracy']:.4f} | {s['bench_auc']:.4f} |" for s in scores]
    return "\n".join(lines)


def parse_reference(text: str) -> tuple[str, dict]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"error: --reference wants NAME=SUMMARY_JSON, got '{text}'")
    summary = json.loads(Path(path).read_text())
    for key in ("val_auc", "bench_auc"):
        if key not in summary:
            raise SystemExit(f"error: {path} has no '{key}'")
    return name, summary


def plot(saved: Path, references: list[tuple[str, dict]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, losses, phase2 = train_losses(read_jsonl(saved / "metrics.jsonl"))
    scores = read_jsonl(saved / "scores.jsonl")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot(steps, losses, color="0.8", linewidth=0.6, label="logged")
    left.plot(steps, smoothed(losses), color="C0", label=f"smoothed ({LOSS_SMOOTHING})")
    if phase2 is not None:
        left.axvline(phase2, color="0.4", linestyle=":", label="phase 2")
    left.set_xlabel("step")
    left.set_ylabel("training loss (BCE on pool rows; tasks harden by stage)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)

    minutes = [s["training_minutes"] for s in scores]
    right.plot(minutes, [s["val_auc"] for s in scores], marker="o", color="C1",
               label="validation AUC (synthetic split)")
    right.plot(minutes, [s["bench_auc"] for s in scores], marker="s", color="C2",
               label="dev AUC (20 datasets x 2)")
    for k, (name, summary) in enumerate(references):
        style = ["--", "-."][k % 2]
        right.axhline(summary["val_auc"], color="C1", linestyle=style, linewidth=0.9,
                      label=f"{name}: validation")
        right.axhline(summary["bench_auc"], color="C2", linestyle=style, linewidth=0.9,
                      label=f"{name}: dev")
    right.set_xlabel("training minutes (wall clock on 2 cores, from logged throughput)")
    right.set_ylabel("AUC")
    right.grid(alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(f"{saved.name}: step {scores[-1]['step']:,}" if scores else saved.name)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved", type=Path, help="a saved run, e.g. checkpoints/puicl-v1-run")
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=SUMMARY_JSON")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    references = [parse_reference(text) for text in args.reference]
    print(table(read_jsonl(args.saved / "scores.jsonl")))
    plot(args.saved, references, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
