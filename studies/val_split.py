"""Exported weights scored on a run config's synthetic validation split, as the trainer scores
its EMA weights (``trainer.validation``): the step-0 point of a fine-tuning run's curve, or a
mix of two runs' weights (``trainer interpolate``), which the trainer never sees.

The split is the one ``prior-gen --config CONFIG --split val`` writes (the config's
``validation.stages`` and ``steps_per_stage``, or ``--steps``); the summary has the AUC,
accuracy and loss overall and by the config's π buckets. On CPU, in float32::

    python -m studies.val_split --config configs/puicl_v11_ft_large.yaml \\
        --shards runs/ft_large/shards --steps 20 puicl_model/net/weights runs/ft_large/weights
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from prior_gen.shards import open_shards
from puicl_model.net.backends.packed_inference import inference_logits
from puicl_model.net.weights import load_weights
from trainer.batching import collate_with_targets, plan_micro_batches
from trainer.config import load_run_config
from trainer.evaluation import TaskScores, score_task, summarize
from trainer.validation import ValidationSet


@torch.no_grad()
def split_scores(model: torch.nn.Module, tasks: ValidationSet, batch_size: int,
                 pi_edges: list[float]) -> dict[str, object]:
    """The trainer's validation summary of ``model`` on ``tasks`` (one process, CPU)."""
    model.eval()
    scored: list[TaskScores] = []
    groups = plan_micro_batches([t.x.shape[0] for t in tasks.tasks],
                                [t.x.shape[1] for t in tasks.tasks], batch_size)
    for group in groups:
        chosen = [tasks.tasks[i] for i in group]
        batch, _, _ = collate_with_targets(chosen)
        logits = inference_logits(model, batch).float()
        for position, index in enumerate(group):
            task = chosen[position]
            n_labeled, n_rows = int(task.n_labeled), task.x.shape[0]
            scored.append(score_task(logits[position, n_labeled:n_rows].numpy(),
                                     task.y[n_labeled:], tasks.stages[index]))
    return summarize(scored, pi_edges)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--shards", type=Path, required=True, help="holds the val split")
    parser.add_argument("--steps", type=int, default=None,
                        help="validation steps per stage (default: the config's; more need "
                        "prior-gen --split val --steps 0-N)")
    parser.add_argument("weights", nargs="+", type=Path, help="exported weights directories")
    args = parser.parse_args(argv)
    validation = load_run_config(args.config).validation
    if args.steps is not None:
        validation = dataclasses.replace(validation, steps_per_stage=args.steps)
    tasks = ValidationSet.read(open_shards(args.shards, "val"), validation)
    for weights in args.weights:
        summary = split_scores(load_weights(weights), tasks, validation.batch_size,
                               list(validation.pi_buckets))
        print(json.dumps({"weights": str(weights), **summary}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
