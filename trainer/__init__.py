"""Distributed trainer of the PUICL model (paper §5).

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.

Training runs as a script, ``torchrun --nproc_per_node N trainer/main.py --config ...`` or
``python trainer/main.py ...``; ``trainer export``, ``trainer interpolate`` and ``trainer plot``
(``trainer.cli``) work on a finished or running run directory. The modules, one job each:

* ``trainer.config``          -- the whole run configuration (``RunConfig``), its loading and
                                 the keys of removed options (refused, or dropped at their
                                 legacy values)
* ``trainer.schedule``        -- the learning-rate schedule (the paper's two phases)
* ``trainer.optimizers``      -- AdamW and the scheduled learning rate
* ``trainer.sampler``         -- which stored step (phase, stage, step in stage) a global step reads
* ``trainer.shard_check``     -- refuses shards that do not fit the run, naming what to generate
* ``trainer.batching``        -- rank slices, size-grouped micro-batches and their collation
* ``trainer.loss``            -- the objective: per-task cross-entropy over the unlabeled rows
* ``trainer.loader``          -- a step's data read and collated ahead, in a thread
* ``trainer.ema``             -- exponential moving average of the weights
* ``trainer.state``           -- model, EMA, optimizer and counters; the initial weights
* ``trainer.attention``       -- the run's attention backend, chosen once and kept
* ``trainer.step``            -- one DDP step: backward passes, all-reduced decision, update
* ``trainer.units``           -- the unit step's cut of a step into units and its exchange
* ``trainer.unit_graphs``     -- a unit's micro-batch to its losses: eager, compiled or a CUDA
                                 graph per padded shape
* ``trainer.unit_step``       -- one unit step: units' gradients gathered, summed in unit
                                 order, decided alike on every rank
* ``trainer.activation_checkpointing`` -- each block's activations recomputed, not stored
* ``trainer.hooks``           -- the step's hook point (a no-op unless a test installs a hook)
* ``trainer.faults``          -- test hooks from the environment: faults, a fake clock
* ``trainer.time_limit``      -- ``--time-limit``: when a segment must end
* ``trainer.checkpoint``      -- atomic, checksummed, keep-last-K checkpoints with RNG states
* ``trainer.dist_env``        -- torchrun environment, process group, collective helpers
* ``trainer.evaluation``      -- validation metrics (AUC with ties, accuracy, per-π buckets)
* ``trainer.validation``      -- the EMA weights scored on the validation split
* ``trainer.metrics_log``     -- the JSONL metrics file and the console/progress-bar reporter
* ``trainer.heap``            -- returns the C heap's free pages to the system above a cap
* ``trainer.stop_signal``     -- SIGTERM / SIGINT: finish the step, checkpoint, exit
* ``trainer.segment``         -- a segment: resume, the steps, validation, checkpoints, its end
* ``trainer.train``           -- the entry point: process group, hooks, exit codes
* ``trainer.export``          -- a run's EMA weights -> the model's safetensors format
* ``trainer.interpolation``   -- (1 - T)·A + T·B of two exported models
* ``trainer.plotting``        -- metrics.jsonl -> PNG
"""

from __future__ import annotations

__all__: list[str] = []
