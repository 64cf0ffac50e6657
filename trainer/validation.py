"""Periodic validation: the EMA weights scored on the held-out split's tasks.

The tasks are read once when a segment starts (``validation.stages`` x
``validation.steps_per_stage`` steps of ``prior-gen --split val``), split over the ranks, and
their per-task scores (``trainer.evaluation``) gathered in one float64 all-reduce.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from prior_gen.shards import ShardReader
from puicl_common.runtime import autocast_for
from puicl_model.net.backends.packed_inference import inference_logits
from trainer.batching import collate_with_targets, plan_micro_batches
from trainer.config import ValidationConfig
from trainer.dist_env import DistEnv, all_reduce_sum
from trainer.evaluation import TaskScores, score_task, summarize


@dataclass
class ValidationSet:
    """The validation tasks and the stage label of each."""

    tasks: list = field(default_factory=list)
    stages: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, reader: ShardReader, validation: ValidationConfig) -> ValidationSet:
        found = cls()
        for stage in validation.stages:
            for step in range(validation.steps_per_stage):
                step_tasks = reader.read_step(stage, step)
                found.tasks.extend(step_tasks)
                found.stages.extend([str(stage)] * len(step_tasks))
        return found


@torch.inference_mode()
def validate(
    model: torch.nn.Module,
    tasks: ValidationSet,
    validation: ValidationConfig,
    precision: str,
    env: DistEnv,
) -> dict[str, object]:
    """Scores of ``model`` (the EMA weights) on the validation tasks, split over the ranks."""
    every = tasks.tasks
    per_rank = -(-len(every) // env.world_size)
    mine = range(env.rank * per_rank, min(len(every), (env.rank + 1) * per_rank))
    table = torch.zeros((len(every), 4), dtype=torch.float64)
    groups = plan_micro_batches(
        [every[i].x.shape[0] for i in mine],
        [every[i].x.shape[1] for i in mine],
        validation.batch_size,
    )
    for group in groups:
        chosen = [every[mine[j]] for j in group]
        batch, _, _ = collate_with_targets(chosen)
        with autocast_for(precision, env.device):
            logits = inference_logits(model, batch.to(env.device)).float().cpu()
        for position, (j, task) in enumerate(zip(group, chosen, strict=True)):
            n_labeled, n_rows = int(task.n_labeled), task.x.shape[0]
            scores = score_task(
                logits[position, n_labeled:n_rows].numpy(), task.y[n_labeled:], "-"
            )
            table[mine[j]] = torch.tensor(
                [scores.loss, scores.auc, scores.accuracy, scores.pi], dtype=torch.float64
            )
    table = all_reduce_sum(table.to(env.device), env).cpu()
    scored = [
        TaskScores(float(r[0]), float(r[1]), float(r[2]), float(r[3]), stage)
        for r, stage in zip(table.tolist(), tasks.stages, strict=True)
    ]
    return summarize(scored, validation.pi_buckets)
