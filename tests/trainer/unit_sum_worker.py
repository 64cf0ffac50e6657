"""Run by tests/trainer/test_units.py, alone or under torchrun: the gradients of 4 units of a
small model on seeded tasks, each rank computing its own units, gathered and added in unit
order (``trainer.units``); rank 0 saves the gathered rows and their sum to the file named by
the first argument."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import torch

from puicl_model.net.config import ModelConfig
from puicl_model.net.model import PUICLModel
from trainer.batching import MicroBatch
from trainer.dist_env import init_distributed, shutdown
from trainer.loss import per_task_loss
from trainer.units import FlatGradients, UnitPlan, gather_units, sum_in_unit_order

CONFIG = ModelConfig(embed_dim=32, num_layers=2, num_heads=2, ff_dim=48)
GLOBAL_BATCH, UNITS = 8, 4


def tasks() -> list[SimpleNamespace]:
    rng = np.random.default_rng(5)
    made = []
    for _ in range(GLOBAL_BATCH):
        labeled, unlabeled, features = (int(rng.integers(4, 12)), int(rng.integers(5, 30)),
                                        int(rng.integers(2, 7)))
        x = rng.normal(size=(labeled + unlabeled, features)).astype(np.float32)
        y = np.ones(labeled + unlabeled, dtype=np.int8)
        y[labeled:] = rng.integers(0, 2, size=unlabeled)
        made.append(SimpleNamespace(x=x, y=y, n_labeled=labeled))
    return made


def main(out: str) -> None:
    torch.set_num_threads(1)
    env = init_distributed("cpu")
    plan = UnitPlan(GLOBAL_BATCH, UNITS, env.world_size, env.rank)
    every = tasks()
    torch.manual_seed(11)
    model = PUICLModel(CONFIG, attention="packed")
    flat = FlatGradients(list(model.parameters()))
    cut = plan.unit_tasks([t.x.shape[0] for t in every])
    local = torch.empty((len(plan.local_units), flat.numel))
    for k, unit in enumerate(plan.local_units):
        micro = MicroBatch.collate([every[i] for i in cut[unit]])
        losses = per_task_loss(model(micro.batch), micro.targets, micro.unlabeled, micro.index)
        (losses.sum() / GLOBAL_BATCH).backward()
        flat.read_into(local[k])
    rows = gather_units(local, plan, env)
    total = sum_in_unit_order(rows)
    if env.is_main:
        torch.save({"rows": rows, "sum": total}, out)
    shutdown(env)


if __name__ == "__main__":
    main(sys.argv[1])
