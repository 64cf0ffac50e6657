"""The training loop: one call of :func:`train` trains one segment of a run.

A segment runs global steps ``[start, stop)``: ``start`` is 0 for a new run or the step of the
checkpoint it resumes from; ``stop`` is the end of the run, or earlier with ``--max-steps`` /
``--until-step``. Each step (see ``trainer.batching`` for the loss scaling):

1. the sampler gives the stored step to read; this rank reads its contiguous slice of tasks
   and collates its micro-batches (``trainer.loader``: a background thread, ahead of time);
2. forward/backward per micro-batch (DDP synchronises gradients on the last one only);
3. gradient norm, then one all-reduce of [loss sum, non-finite flag, signal, time up] so
   that every rank takes the same decisions: skip the step (any non-finite loss or gradient
   anywhere), or clip, set the scheduled learning rate, step the optimizer
   (``trainer.optimizers``) and update the EMA; and
   whether this step is the segment's last (a signal, or ``--time-limit`` on any rank:
   ``trainer.time_limit``); a process holding more than ``training.release_memory_above_gb``
   then returns its allocator's free pages to the system (``trainer.heap``);
4. every ``log_every`` steps a metrics record, every ``validation.every_steps`` a validation
   of the EMA weights, every ``checkpoint_every`` (and at the segment's end, on SIGTERM /
   SIGINT, or when the time limit comes near) a checkpoint.

Nothing in a step depends on wall-clock time, rank-local randomness or the checkpoint
history, which is why a resumed run reproduces an uninterrupted one bit for bit (the clock
decides only where a time-limited segment ends).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch.nn.parallel import DistributedDataParallel

from prior_gen.errors import ShardError
from prior_gen.shards import ShardReader
from puicl_common.configio import ConfigError
from puicl_common.output_paths import os_error_message
from puicl_common.runtime import autocast_for
from puicl_model.backends import BACKENDS, resolve_backend
from puicl_model.backends.packed_inference import inference_logits
from puicl_model.model import PUICLModel
from puicl_model.weights import WeightsError, load_weights
from trainer.activation_checkpointing import apply_activation_checkpointing
from trainer.batching import (
    accumulate_micro_batches,
    assemble_micro_batches,
    collate_with_targets,
    plan_micro_batches,
    rank_slice,
)
from trainer.checkpoint import (
    CheckpointError,
    CheckpointStore,
    atomic_write_bytes,
    capture_rng_state,
    restore_rng_state,
)
from trainer.config import RunConfig, load_run_config, run_config_to_dict
from trainer.dist_env import DistEnv, all_reduce_sum, init_distributed, shutdown
from trainer.ema import WeightEMA
from trainer.evaluation import TaskScores, score_task, summarize
from trainer.faults import FaultPlan, clock_from_env, faults_from_env
from trainer.heap import peak_resident_bytes, release_if_above, resident_bytes
from trainer.loader import StepData, StepLoader
from trainer.metrics_log import ConsoleReporter, MetricsLog
from trainer.optimizers import build_optimizer, set_learning_rate
from trainer.sampler import StepSampler
from trainer.schedule import learning_rate
from trainer.shard_check import (
    ShardPlanError,
    check_train_shards,
    check_val_shards,
    manifest_sha256,
)
from trainer.time_limit import Clock, MonotonicClock, TimeBudget

# seed-key word for the model's initial weights (docs/architecture.md §3: keyed by what is drawn)
INIT_KEY = 0x1A17


class TrainingStopped(RuntimeError):
    """The run stopped on purpose (too many consecutive non-finite steps)."""


@dataclass(frozen=True)
class TrainArgs:
    """Command-line arguments of ``trainer/main.py`` (see ``trainer.main``)."""

    config: Path
    shards: Path
    run_dir: Path
    val_shards: Path | None = None  # default: the --shards directory
    resume: Path | None = None  # a checkpoint file; default: the run directory's newest
    max_steps: int | None = None  # train at most this many steps in this segment
    until_step: int | None = None  # stop when this many steps are completed
    device: str = "auto"
    threads: int | None = None  # torch intra-op threads per process
    time_limit_s: float | None = None  # end the segment with a checkpoint before this
    # time.monotonic() when the process started, which the time limit counts from
    # (default: when train() is called)
    started_at: float | None = None


@dataclass
class Counters:
    skipped_total: int = 0
    consecutive_skips: int = 0

    def state(self) -> dict[str, int]:
        return {"skipped_total": self.skipped_total, "consecutive_skips": self.consecutive_skips}


class _StopFlag:
    """Set by SIGTERM/SIGINT; the loop finishes the step, checkpoints and exits."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        # a second signal takes the default path (immediate exit)
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _autocast(config: RunConfig, device: torch.device) -> contextlib.AbstractContextManager:
    return autocast_for(config.training.precision, device)


def init_model(config: RunConfig, device: torch.device) -> PUICLModel:
    """The model with initial weights drawn from the run's seed (same on every rank), or
    read from ``training.init_weights`` for a fine-tuning run."""
    sequence = np.random.SeedSequence(config.seed, spawn_key=(INIT_KEY,))
    seed_words = sequence.generate_state(2)
    # seeded either way: the torch generator's state after this point is part of the run
    torch.manual_seed(int(seed_words[0]) << 32 | int(seed_words[1]))
    model = PUICLModel(config.model).to(device)
    if config.training.init_weights is not None:
        model.load_state_dict(_initial_weights(config))
    if config.training.activation_checkpointing:
        apply_activation_checkpointing(model)
    return model


def _initial_weights(config: RunConfig) -> dict[str, torch.Tensor]:
    """The state dict at ``training.init_weights``, checked against the config's model."""
    path = config.training.init_weights
    try:
        loaded = load_weights(path)  # verifies names, shapes and the checksum
    except WeightsError as err:
        raise ConfigError("training.init_weights", str(err)) from None
    if loaded.config != config.model:
        raise ConfigError(
            "training.init_weights",
            f"{path} holds a model with {loaded.config.to_mapping()}, but the config's model "
            f"section asks for {config.model.to_mapping()}: set the model section to the "
            "weights' config",
        )
    return loaded.state_dict()


def choose_attention(config: RunConfig, env: DistEnv, recorded: str | None) -> str:
    """The run's attention backend: the one its checkpoints recorded, else the config's,
    resolved on rank 0 (``auto`` may time the CPU kernel) and shared with every rank."""
    asked = config.training.attention
    if recorded is not None:
        if asked not in ("auto", recorded):
            raise ConfigError(
                "training.attention",
                f"this run trains with the attention backend {recorded!r} (recorded in its "
                f"checkpoints); the config asks for {asked!r}. Backends differ in float "
                "rounding, so a run keeps its backend: set 'auto' or "
                f"{recorded!r}, or start a new --run-dir",
            )
        name = recorded
    else:
        name = resolve_backend(asked, env.device, training=True) if env.is_main else ""
    if env.distributed:  # rank 0's choice, for every rank
        index = torch.tensor([BACKENDS.index(name) if env.is_main else 0], device=env.device)
        name = BACKENDS[int(all_reduce_sum(index, env)[0])]
    if name == "cpu_kernel":
        resolve_backend(name, env.device, training=True)  # builds (or loads) it on this rank
    return name


def _config_differences(saved: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list:
    diffs = []
    for key in sorted(set(saved) | set(current)):
        path = f"{prefix}{key}"
        a, b = saved.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            diffs.extend(_config_differences(a, b, path + "."))
        elif a != b:
            diffs.append(f"{path}: {a!r} in the checkpoint, {b!r} now")
    return diffs


class Trainer:
    """State and steps of one training segment on one rank."""

    def __init__(self, args: TrainArgs, config: RunConfig, env: DistEnv, faults: FaultPlan):
        self.args = args
        self.config = config
        self.env = env
        self.faults = faults
        self.sampler = StepSampler(config.training.sampler, config.curriculum, config.seed)
        self.plan = self.sampler.plan
        self.global_batch = config.curriculum.global_batch
        try:
            self.slice = rank_slice(self.global_batch, env.rank, env.world_size)
        except ValueError as err:
            raise ConfigError("curriculum.global_batch", str(err)) from None
        self.store = CheckpointStore(args.run_dir / "checkpoints", config.training.keep_checkpoints)
        # computed once: it may read a file (training.init_weights), and it cannot change
        self.training_hash = config.training_hash()
        self.counters = Counters()
        self.model = init_model(config, env.device)
        self.ema = WeightEMA(self.model, config.training.ema_decay)
        self.optimizer = build_optimizer(self.model, config.training)
        self.start_step = 0
        self.resumed_from: Path | None = None
        self.recorded_attention: str | None = None  # the backend a resumed run trained with
        self.attention = ""  # set by choose_attention()
        self.reader: ShardReader | None = None  # opened by check_data
        self.val_reader: ShardReader | None = None
        self.val_tasks: list = []
        self.val_stages: list[str] = []  # stage label of each validation task

    # ----------------------------------------------------------------- resume ---------------
    def resume(self) -> None:
        found = None
        if self.args.resume is not None:
            found = (self.args.resume, self.store.load(self.args.resume))
        else:
            found = self.store.latest()
        if found is None:
            return
        path, payload = found
        if payload["training_hash"] != self.training_hash:
            diffs = _config_differences(
                payload["config"], run_config_to_dict(self.config)
            )
            raise ConfigError(
                "",
                f"{path} was trained with a different configuration; resuming would not "
                "continue the same run. Differences: " + "; ".join(diffs[:10])
                + ". Use the original config, or a new --run-dir for a new run.",
            )
        if payload["world_size"] != self.env.world_size and self.env.is_main:
            warnings.warn(
                f"resuming a run trained with {payload['world_size']} processes on "
                f"{self.env.world_size}: the result is the same up to float rounding, "
                "not bit-identical",
                stacklevel=2,
            )
        self.model.load_state_dict(payload["model"])
        self.ema.load_state_dict(payload["ema"])
        self.optimizer.load_state_dict(payload["optimizer"])
        restore_rng_state(payload["rng"])
        self.counters = Counters(**payload["counters"])
        self.start_step = int(payload["step"])
        self.resumed_from = path
        self.recorded_attention = payload.get("attention")  # None: written before it was

    def choose_attention(self) -> None:
        """Fix the run's attention backend (after :meth:`resume`) for the model and its EMA."""
        self.attention = choose_attention(self.config, self.env, self.recorded_attention)
        self.model.attention = self.attention
        self.ema.module.attention = self.attention

    def segment_stop(self) -> int:
        stop = self.plan.total_steps
        if self.args.until_step is not None:
            stop = min(stop, self.args.until_step)
        if self.args.max_steps is not None:
            stop = min(stop, self.start_step + self.args.max_steps)
        return stop

    # ----------------------------------------------------------------- checks ---------------
    def check_data(self, stop: int) -> None:
        """Open the shards, refusing any that cannot feed steps [start, stop) of this run.

        Both splits are checked before refusing, so that one message names everything to
        generate (e.g. the tail and the validation split), not one piece per attempt.
        """
        problems = []
        try:
            self.reader = check_train_shards(
                self.args.shards, self.config, self.args.config, self.sampler,
                self.start_step, stop,
            )
        except ShardPlanError as err:
            problems.append(str(err))
        validation = self.config.validation
        if validation.every_steps > 0:
            val_dir = self.args.val_shards or self.args.shards
            try:
                self.val_reader = check_val_shards(val_dir, self.config, self.args.config)
            except ShardPlanError as err:
                problems.append(str(err))
        if problems:  # train() prefixes the first line with "error: "
            raise ShardPlanError("\nerror: ".join(problems))
        if validation.every_steps > 0:
            for stage in validation.stages:
                for step in range(validation.steps_per_stage):
                    step_tasks = self.val_reader.read_step(stage, step)
                    self.val_tasks.extend(step_tasks)
                    self.val_stages.extend([str(stage)] * len(step_tasks))

    # ----------------------------------------------------------------- one step -------------
    def _set_lr(self, global_step: int) -> float:
        lr = learning_rate(global_step, self.plan, self.config.training)
        set_learning_rate(self.optimizer, lr)
        return lr

    def prepare_step(self, global_step: int) -> StepData:
        """This rank's data of ``global_step``, collated (runs in the loader's thread)."""
        address = self.sampler.address(global_step)
        start, stop = self.slice
        tasks = self.reader.read_step(address.stage, address.step_in_stage, start, stop)
        training = self.config.training
        groups = plan_micro_batches(
            [t.x.shape[0] for t in tasks],
            [t.x.shape[1] for t in tasks],
            training.micro_batch_size,
            training.micro_batch_cells,
            training.group_by_rows,
        )
        pin = self.env.device.type == "cuda"
        return StepData(global_step, address, assemble_micro_batches(tasks, groups, pin))

    def train_step(
        self,
        data: StepData,
        module: torch.nn.Module,
        stop_flag: _StopFlag,
        time_up: Callable[[], bool] = lambda: False,
    ) -> dict[str, Any]:
        global_step, address = data.global_step, data.address
        if self.faults.sigterm_at(global_step, self.env.rank):
            os.kill(os.getpid(), signal.SIGTERM)
        training = self.config.training
        self.optimizer.zero_grad(set_to_none=True)
        local_loss = accumulate_micro_batches(
            module,
            data.micro_batches,
            scale=self.env.world_size / self.global_batch,
            device=self.env.device,
            autocast=lambda: _autocast(self.config, self.env.device),
            corrupt=self.faults.corruption_at(global_step, self.env.rank),
        )

        if self.faults.kill_at(global_step, self.env.rank):
            os.kill(os.getpid(), signal.SIGKILL)
        clip = self.config.training.optimizer.grad_clip
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), max_norm=clip if clip > 0 else float("inf")
        )
        nonfinite = not (torch.isfinite(local_loss) and torch.isfinite(grad_norm))
        decision = torch.tensor(
            [local_loss.item(), float(nonfinite), float(stop_flag.requested), float(time_up())],
            dtype=torch.float64,
            device=self.env.device,
        )
        all_reduce_sum(decision, self.env)
        skip = bool(decision[1].item() > 0)
        lr = self._set_lr(global_step)
        if skip:
            self.optimizer.zero_grad(set_to_none=True)
            self.counters.skipped_total += 1
            self.counters.consecutive_skips += 1
        else:
            self.optimizer.step()
            self.ema.update(self.model)
            self.counters.consecutive_skips = 0
        release_if_above(training.release_memory_above_gb)
        return {
            "loss": decision[0].item() / self.global_batch,
            "grad_norm": float(grad_norm),
            "lr": lr,
            "phase": address.phase,
            "stage": address.stage,
            "skipped": skip,
            # a signal or the time limit on any rank stops every rank after this step
            "stop": bool(decision[2].item() > 0 or decision[3].item() > 0),
            "stop_reason": "signal" if decision[2].item() > 0 else "time limit",
        }

    # ----------------------------------------------------------------- validation -----------
    @torch.inference_mode()
    def validate(self) -> dict[str, object]:
        """Scores of the EMA weights on the validation tasks, split over the ranks."""
        tasks = self.val_tasks
        per_rank = -(-len(tasks) // self.env.world_size)
        mine = range(self.env.rank * per_rank, min(len(tasks), (self.env.rank + 1) * per_rank))
        table = torch.zeros((len(tasks), 4), dtype=torch.float64)
        model = self.ema.module
        groups = plan_micro_batches(
            [tasks[i].x.shape[0] for i in mine],
            [tasks[i].x.shape[1] for i in mine],
            self.config.validation.batch_size,
        )
        for group in groups:
            chosen = [tasks[mine[j]] for j in group]
            batch, _, _ = collate_with_targets(chosen)
            with _autocast(self.config, self.env.device):
                logits = inference_logits(model, batch.to(self.env.device)).float().cpu()
            for position, (j, task) in enumerate(zip(group, chosen, strict=True)):
                n_labeled, n_rows = int(task.n_labeled), task.x.shape[0]
                scores = score_task(
                    logits[position, n_labeled:n_rows].numpy(), task.y[n_labeled:], "-"
                )
                table[mine[j]] = torch.tensor(
                    [scores.loss, scores.auc, scores.accuracy, scores.pi], dtype=torch.float64
                )
        table = all_reduce_sum(table.to(self.env.device), self.env).cpu()
        scored = [
            TaskScores(float(r[0]), float(r[1]), float(r[2]), float(r[3]), stage)
            for r, stage in zip(table.tolist(), self.val_stages, strict=True)
        ]
        return summarize(scored, self.config.validation.pi_buckets)

    # ----------------------------------------------------------------- checkpoint -----------
    def save_checkpoint(self, completed: int) -> Path | None:
        if not self.env.is_main:
            return None
        payload = {
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": capture_rng_state(),
            "counters": self.counters.state(),
            "config": run_config_to_dict(self.config),
            "training_hash": self.training_hash,
            "generation_hash": self.config.generation().hash(),
            "shard_manifest_sha256": manifest_sha256(self.reader),
            "world_size": self.env.world_size,
            "torch_version": str(torch.__version__),
            "attention": self.attention,
        }
        return self.store.save(completed, payload)


def _new_window() -> dict[str, Any]:
    """Accumulators of one logging window."""
    return {
        "loss": [], "grad_norm": [], "skipped": 0, "steps": 0, "seconds": 0.0, "data_wait": 0.0
    }


def _write_run_files(run_dir: Path, config: RunConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(run_config_to_dict(config), sort_keys=False)
    atomic_write_bytes(run_dir / "config.yaml", text.encode("utf-8"))


def _time_budget(args: TrainArgs, clock: Clock) -> TimeBudget | None:
    if args.time_limit_s is None:
        return None
    # the limit counts from the process's start on the real clock; a fake clock starts at 0
    origin = args.started_at if isinstance(clock, MonotonicClock) else None
    return TimeBudget(args.time_limit_s, clock, origin)


def run_segment(args: TrainArgs, env: DistEnv, faults: FaultPlan) -> int:
    """Train one segment on this rank; returns the number of completed steps of the run."""
    config = load_run_config(args.config)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    trainer = Trainer(args, config, env, faults)
    trainer.resume()
    start, stop = trainer.start_step, trainer.segment_stop()
    trainer.check_data(stop)
    trainer.choose_attention()
    training = config.training
    if env.is_main:
        _write_run_files(args.run_dir, config)
    metrics = MetricsLog(args.run_dir / "metrics.jsonl", start) if env.is_main else None
    reporter = ConsoleReporter(start, stop, enabled=env.is_main)
    if start >= stop:
        reporter.summary(f"nothing to train: the run is at step {start} of {stop}")
        if metrics is not None:
            metrics.close()
        return start

    module: torch.nn.Module = trainer.model
    if env.distributed:
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        module = DistributedDataParallel(trainer.model, device_ids=device_ids)
    if training.compile:
        # around DDP (as PyTorch recommends: its optimizer then splits the graph at the
        # gradient buckets); checkpoints and the EMA keep reading trainer.model
        module = torch.compile(module)

    origin = f"resumed from {trainer.resumed_from}" if trainer.resumed_from else "new run"
    reporter.summary(
        f"training steps {start}..{stop - 1} of {trainer.plan.total_steps} ({origin}); "
        f"{env.world_size} process(es) on {env.device}, attention {trainer.attention}; "
        f"run dir {args.run_dir}"
    )
    if metrics is not None:
        metrics.write(
            {"kind": "event", "event": "start", "step": start, "stop": stop, "origin": origin,
             "world_size": env.world_size, "device": str(env.device),
             "attention": trainer.attention}
        )

    clock = clock_from_env(env.rank)
    budget = _time_budget(args, clock)
    every_val, every_checkpoint = config.validation.every_steps, training.checkpoint_every

    def validates_at(completed: int) -> bool:
        return every_val > 0 and (
            completed % every_val == 0 or completed == trainer.plan.total_steps
        )

    def time_up_after(global_step: int) -> Callable[[], bool]:
        """Asked during ``global_step``: must it be the segment's last, for the time limit?"""
        def ask() -> bool:
            if budget is None or global_step + 1 >= stop:
                return False  # no limit, or the segment's end anyway
            this, following = global_step + 1, global_step + 2  # completed-step counts
            return budget.must_stop(
                validations=int(validates_at(this)) + int(validates_at(following)),
                checkpoints=int(this % every_checkpoint == 0),
                validation_steps=len(trainer.val_tasks) / trainer.global_batch,
            )
        return ask

    stop_flag = _StopFlag()
    stop_flag.install()
    window = _new_window()
    completed = start
    thread_setup = None
    if env.device.type == "cuda":
        def thread_setup() -> None:
            torch.cuda.set_device(env.device)
    loader = StepLoader(
        trainer.prepare_step, start, stop, training.prefetch_steps, thread_setup
    )
    try:
        for global_step in range(start, stop):
            step_began = clock.now()
            clock.step_started()
            began = time.perf_counter()
            waited = loader.wait_seconds
            data = next(loader)
            window["data_wait"] += loader.wait_seconds - waited
            result = trainer.train_step(data, module, stop_flag, time_up_after(global_step))
            window["seconds"] += time.perf_counter() - began
            if budget is not None:
                budget.record_step(clock.now() - step_began)
            completed = global_step + 1
            window["steps"] += 1
            if result["skipped"]:
                window["skipped"] += 1
                if metrics is not None:
                    metrics.write({"kind": "event", "event": "skipped", "step": completed,
                                   "loss": result["loss"], "grad_norm": result["grad_norm"]})
                reporter.summary(
                    f"step {completed}/{stop}: non-finite loss or gradient on some rank; "
                    f"step skipped ({trainer.counters.consecutive_skips} in a row)"
                )
                if trainer.counters.consecutive_skips >= training.max_consecutive_skips:
                    raise TrainingStopped(
                        f"{trainer.counters.consecutive_skips} consecutive steps had a "
                        f"non-finite loss or gradient (limit training.max_consecutive_skips="
                        f"{training.max_consecutive_skips}); stopping at step {completed}. "
                        "The last checkpoint holds the state before the divergence."
                    )
            else:
                window["loss"].append(result["loss"])
                window["grad_norm"].append(result["grad_norm"])
            reporter.step({"loss": f"{result['loss']:.4f}", "stage": result["stage"]})

            if completed % training.log_every == 0 or completed == stop:
                record = {
                    "kind": "train",
                    "step": completed,
                    "phase": result["phase"],
                    "stage": result["stage"],
                    "loss": float(np.mean(window["loss"])) if window["loss"] else None,
                    "grad_norm": (
                        float(np.mean(window["grad_norm"])) if window["grad_norm"] else None
                    ),
                    "lr": result["lr"],
                    # training throughput: time in steps only (not validation, checkpoints)
                    "tasks_per_s": window["steps"] * trainer.global_batch
                    / max(window["seconds"], 1e-9),
                    # rank 0's time waiting for its data, as a share of the steps' time: near 0
                    # when the loader keeps ahead (trainer.loader)
                    "data_wait_share": window["data_wait"] / max(window["seconds"], 1e-9),
                    "skipped": window["skipped"],
                    "skipped_total": trainer.counters.skipped_total,
                    # rank 0's resident memory: watch it grow, or stay under the release cap
                    "rss_gb": resident_bytes() / 1e9,
                    "peak_rss_gb": peak_resident_bytes() / 1e9,
                }
                if metrics is not None:
                    metrics.write(record)
                if reporter.bar is None:
                    loss = "n/a" if record["loss"] is None else f"{record['loss']:.4f}"
                    reporter.summary(
                        f"step {completed}/{stop} phase {record['phase']} stage "
                        f"{record['stage']} loss {loss} lr {record['lr']:.3g} "
                        f"{record['tasks_per_s']:.1f} tasks/s"
                    )
                window = _new_window()

            if validates_at(completed):
                validation_began = clock.now()
                summary = trainer.validate()
                if budget is not None:
                    budget.record_validation(clock.now() - validation_began)
                if metrics is not None:
                    metrics.write({"kind": "val", "step": completed, **summary})
                reporter.summary(
                    f"validation at step {completed}: loss {summary['loss']:.4f} "
                    f"AUC {summary['auc']:.4f} accuracy {summary['accuracy']:.4f}"
                )

            if (
                completed % training.checkpoint_every == 0
                or completed == stop
                or result["stop"]
            ):
                checkpoint_began = clock.now()
                path = trainer.save_checkpoint(completed)
                if budget is not None:
                    budget.record_checkpoint(clock.now() - checkpoint_began)
                if path is not None and metrics is not None:
                    metrics.write({"kind": "event", "event": "checkpoint", "step": completed,
                                   "path": str(path)})
            if result["stop"]:
                if metrics is not None:
                    metrics.write({"kind": "event", "event": "stopped", "step": completed,
                                   "reason": result["stop_reason"]})
                if result["stop_reason"] == "signal":
                    reporter.summary(f"stop requested: checkpoint written at step {completed}")
                else:
                    reporter.summary(
                        f"time limit: checkpoint written at step {completed}; the next step "
                        "and a checkpoint would not fit before the limit. Start the same "
                        "command again to continue"
                    )
                break
    finally:
        loader.close()
        stop_flag.uninstall()
        reporter.close()
        if metrics is not None:
            metrics.close()
    return completed


def train(args: TrainArgs) -> int:
    """Entry point of ``trainer/main.py``: set up the process group, train, tear down.

    Returns the process exit code: 0 done, 2 configuration or data problem, 3 stopped after
    too many non-finite steps.
    """
    if args.started_at is None:
        args = dataclasses.replace(args, started_at=time.monotonic())
    try:
        env = init_distributed(args.device)
    except ValueError as err:  # e.g. --device cuda on a machine without a GPU
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    try:
        run_segment(args, env, faults_from_env())
        return 0
    except (ConfigError, ShardPlanError, ShardError, CheckpointError) as err:
        # every rank meets the same config/plan problems: rank 0 reports them; a damaged
        # shard may be in one rank's slice only, so that rank reports it itself
        if env.is_main:
            print(f"error: {err}", file=sys.stderr, flush=True)
        elif isinstance(err, ShardError):
            print(f"error (rank {env.rank}): {err}", file=sys.stderr, flush=True)
        return 2
    except TrainingStopped as err:
        if env.is_main:
            print(f"stopped: {err}", file=sys.stderr, flush=True)
        return 3
    except OSError as err:
        # the file system refused a write or read (a full disk under metrics.jsonl, a
        # read-only run directory): on whichever rank it happened
        where = "" if env.is_main else f" (rank {env.rank})"
        print(f"error{where}: {os_error_message(err)}", file=sys.stderr, flush=True)
        return 2
    finally:
        shutdown(env)
