"""Distributed trainer of the PUICL model (paper §5).

The paper: Liu, Chang, Cheng, Tian, Li, "In-Context Positive-Unlabeled Learning", arXiv:2605.05591.

Training runs as a script, ``torchrun --nproc_per_node N trainer/main.py --config ...`` or
``python trainer/main.py ...``; ``trainer export`` and ``trainer plot`` (``trainer.cli``) work
on a finished or running run directory. The modules, one job each:

* ``trainer.config``      -- the whole run configuration (``RunConfig``) and its loading
* ``trainer.schedule``    -- the learning-rate schedules (paper's two phases, or WSD)
* ``trainer.optimizers``  -- AdamW, or Muon for the blocks' matrices + AdamW for the rest
* ``trainer.sampler``     -- which stored step (phase, stage, step in stage) a global step reads
* ``trainer.shard_check`` -- refuses shards that do not fit the run, naming what to generate
* ``trainer.batching``    -- rank slices, size-grouped micro-batches, the per-task loss
* ``trainer.ema``         -- exponential moving average of the weights
* ``trainer.averaging``   -- the mean of the newest checkpoints' weights (for export)
* ``trainer.checkpoint``  -- atomic, checksummed, keep-last-K checkpoints with RNG states
* ``trainer.dist_env``    -- torchrun environment, process group, collective helpers
* ``trainer.evaluation``  -- validation metrics (AUC with ties, accuracy, per-π buckets)
* ``trainer.metrics_log`` -- the JSONL metrics file and the console/progress-bar reporter
* ``trainer.heap``        -- returns the C heap's free pages to the system above a cap
* ``trainer.loop``        -- the training loop that ties these together
* ``trainer.export``      -- a run's EMA (or averaged) weights -> the model's safetensors format
* ``trainer.plotting``    -- metrics.jsonl -> PNG
"""

from __future__ import annotations

__all__: list[str] = []
