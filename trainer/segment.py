"""One training segment on one rank: steps ``[start, stop)`` of a run, with its checkpoints.

``start`` is 0 for a new run or the step of the checkpoint it resumes from; ``stop`` is the end
of the run, or earlier with ``--max-steps`` / ``--until-step``. Each step:

1. the sampler gives the stored step to read; this rank reads its share (a slice of tasks, or
   its units: ``trainer.units``) and collates it (``trainer.loader``: a thread, ahead of time);
2. ``trainer.step`` (DDP) or ``trainer.unit_step`` trains it, and its decision, alike on every
   rank, says whether it is the segment's last (a signal, or ``--time-limit`` on any rank);
3. every ``log_every`` steps a metrics record (``trainer.metrics_log``), every
   ``validation.every_steps`` a validation of the EMA weights (``trainer.validation``), every
   ``checkpoint_every`` (and at the segment's end, on SIGTERM / SIGINT, or when the time limit
   comes near) a checkpoint.

Nothing in a step depends on wall-clock time, rank-local randomness or the checkpoint
history, which is why a resumed run reproduces an uninterrupted one bit for bit (the clock
decides only where a time-limited segment ends).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from torch.nn.parallel import DistributedDataParallel

from prior_gen.shards import ShardReader
from puicl_common.configio import ConfigError, config_differences, strip_removed_keys
from puicl_common.run_files import write_bytes_inside
from puicl_model.net.model import PUICLModel
from trainer.attention import choose_attention
from trainer.batching import assemble_micro_batches, plan_micro_batches, rank_slice
from trainer.checkpoint import (
    CheckpointError,
    CheckpointStore,
    capture_rng_state,
    restore_rng_state,
)
from trainer.config import RunConfig, TrainingConfig, load_run_config, run_config_to_dict
from trainer.determinism import (
    apply_determinism,
    hardware_identity,
    recorded_reproduction,
    restored_mode,
    warn_if_not_reproducible,
)
from trainer.dist_env import DistEnv
from trainer.faults import clock_from_env
from trainer.loader import StepData, StepLoader
from trainer.metrics_log import SegmentLog
from trainer.sampler import StepSampler
from trainer.shard_check import (
    ShardPlanError,
    check_train_shards,
    check_val_shards,
    manifest_sha256,
)
from trainer.state import TrainingState
from trainer.step import DdpStep, StepResult
from trainer.stop_signal import StopFlag
from trainer.time_limit import Clock, MonotonicClock, TimeBudget
from trainer.unit_step import UnitStep
from trainer.units import rank_units, unit_plan
from trainer.validation import ValidationSet, validate


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
    dist_backend: str | None = None  # None: NCCL on GPUs, gloo on CPU; gloo: GPUs shared
    time_limit_s: float | None = None  # end the segment with a checkpoint before this
    # time.monotonic() when the process started, which the time limit counts from
    # (default: when train() is called)
    started_at: float | None = None


class Segment:
    """What one rank's segment trains from and writes to: the run's state, its data, its
    checkpoints."""

    def __init__(self, args: TrainArgs, config: RunConfig, env: DistEnv) -> None:
        self.args = args
        self.config = config
        self.env = env
        self.sampler = StepSampler(config.training.sampler, config.curriculum, config.seed)
        self.plan = self.sampler.plan
        self.global_batch = config.curriculum.global_batch
        self.units = unit_plan(config, env)  # None: the DDP step
        try:
            self.slice = rank_slice(self.global_batch, env.rank, env.world_size)
        except ValueError as err:
            raise ConfigError("curriculum.global_batch", str(err)) from None
        # strict deterministic kernels, set before the model reaches the device (CUDA only)
        self.deterministic = apply_determinism(config.training.deterministic, env.device,
                                               config.training.deterministic_fill)
        self.hardware = hardware_identity(env.device)
        self.store = CheckpointStore(args.run_dir / "checkpoints", config.training.keep_checkpoints)
        # computed once: it may read a file (training.init_weights), and it cannot change
        self.training_hash = config.training_hash()
        self.state = TrainingState.initial(config, env.device)
        self.start_step = 0
        self.resumed_from: Path | None = None
        self.recorded_attention: str | None = None  # the backend a resumed run trained with
        self.attention = ""  # set by choose_attention()
        self.reader: ShardReader | None = None  # opened by check_data
        self.validation_set = ValidationSet()

    def resume(self) -> None:
        """Take the state of the checkpoint to resume from (``--resume``, else the newest)."""
        if self.args.resume is not None:
            found = (self.args.resume, self.store.load(self.args.resume))
        else:
            found = self.store.latest()
        if found is None:
            return
        path, payload = found
        try:
            self._take(path, payload)
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            # it passed its checksum, so it was written whole: by another program, or crafted
            raise CheckpointError(
                f"{path} passes its checksum but is not a checkpoint this trainer can resume "
                f"({type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}); "
                "resume another with --resume PATH, or start a new --run-dir"
            ) from None

    def _take(self, path: Path, payload: dict) -> None:
        """Check the checkpoint ``payload`` (read from ``path``) and take its state."""
        if payload["training_hash"] != self.training_hash:
            # a checkpoint written before an option's removal still names it (at its legacy
            # value): not a difference of this run's configuration
            saved = strip_removed_keys(RunConfig, payload["config"])
            diffs = config_differences(saved, run_config_to_dict(self.config))
            raise ConfigError(
                "",
                f"{path} was trained with a different configuration; resuming would not "
                "continue the same run. Differences: " + "; ".join(diffs[:10])
                + ". Use the original config, or a new --run-dir for a new run.",
            )
        if payload["world_size"] != self.env.world_size and self.env.is_main and not self.units:
            warnings.warn(
                f"resuming a run trained with {payload['world_size']} processes on "
                f"{self.env.world_size}: the result is the same up to float rounding, "
                "not bit-identical",
                stacklevel=2,
            )
        recorded_reproduction(payload)  # on every process: all refuse a damaged one alike
        if self.env.is_main:
            warn_if_not_reproducible(path, payload, self.deterministic, self.hardware)
        self.state.load(payload)
        restore_rng_state(payload["rng"])
        self.start_step = int(payload["step"])
        self.resumed_from = path
        self.recorded_attention = payload.get("attention")  # None: written before it was

    def choose_attention(self) -> None:
        """Fix the run's attention backend (after :meth:`resume`) for the model and its EMA."""
        self.attention = choose_attention(self.config, self.env, self.recorded_attention)
        self.state.set_attention(self.attention)

    def stop_step(self) -> int:
        stop = self.plan.total_steps
        if self.args.until_step is not None:
            stop = min(stop, self.args.until_step)
        if self.args.max_steps is not None:
            stop = min(stop, self.start_step + self.args.max_steps)
        return stop

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
        val_reader = None
        if validation.every_steps > 0:
            val_dir = self.args.val_shards or self.args.shards
            try:
                val_reader = check_val_shards(val_dir, self.config, self.args.config)
            except ShardPlanError as err:
                problems.append(str(err))
        if problems:  # train() prefixes the first line with "error: "
            raise ShardPlanError("\nerror: ".join(problems))
        if val_reader is not None:
            self.validation_set = ValidationSet.read(val_reader, validation)

    def prepare_step(self, global_step: int) -> StepData:
        """This rank's data of ``global_step``, collated (runs in the loader's thread)."""
        address = self.sampler.address(global_step)
        training, pin = self.config.training, self.env.device.type == "cuda"
        if self.units is not None:  # the whole step: its units are cut by the tasks' sizes
            tasks = self.reader.read_step(address.stage, address.step_in_stage)
            return StepData(global_step, address, [], rank_units(tasks, self.units, training, pin))
        start, stop = self.slice
        tasks = self.reader.read_step(address.stage, address.step_in_stage, start, stop)
        groups = plan_micro_batches(
            [t.x.shape[0] for t in tasks],
            [t.x.shape[1] for t in tasks],
            training.micro_batch_size,
            training.micro_batch_cells,
            training.group_by_rows,
        )
        return StepData(global_step, address, assemble_micro_batches(tasks, groups, pin))

    def validates_at(self, completed: int) -> bool:
        every = self.config.validation.every_steps
        return every > 0 and (completed % every == 0 or completed == self.plan.total_steps)

    def validate(self) -> dict[str, object]:
        """Scores of the EMA weights on the validation tasks."""
        return validate(
            self.state.ema.module, self.validation_set, self.config.validation,
            self.config.training.precision, self.env,
        )

    def save_checkpoint(self, completed: int) -> Path | None:
        """Write the state after ``completed`` steps (rank 0; the others return None)."""
        if not self.env.is_main:
            return None
        state = self.state
        payload = {
            "model": state.model.state_dict(),
            "ema": state.ema.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "rng": capture_rng_state(),
            "counters": state.counters.state(),
            "config": run_config_to_dict(self.config),
            "training_hash": self.training_hash,
            "generation_hash": self.config.generation().hash(),
            "shard_manifest_sha256": manifest_sha256(self.reader),
            "world_size": self.env.world_size,
            "torch_version": str(torch.__version__),
            "attention": self.attention,
            "deterministic": self.deterministic,
            "hardware": self.hardware,
        }
        return self.store.save(completed, payload)


def _write_run_files(run_dir: Path, config: RunConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(run_config_to_dict(config), sort_keys=False)
    write_bytes_inside(run_dir / "config.yaml", text.encode("utf-8"), run_dir)


def _time_budget(args: TrainArgs, clock: Clock) -> TimeBudget | None:
    if args.time_limit_s is None:
        return None
    # the limit counts from the process's start on the real clock; a fake clock starts at 0
    origin = args.started_at if isinstance(clock, MonotonicClock) else None
    return TimeBudget(args.time_limit_s, clock, origin)


def _training_module(model: PUICLModel, env: DistEnv,
                     training: TrainingConfig) -> torch.nn.Module:
    """What the steps call: the model, under DDP (the DDP step's processes), compiled if asked."""
    module = model
    if env.distributed and training.gradient_sum == "all_reduce":
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        module = DistributedDataParallel(model, device_ids=device_ids)
    if training.compile:
        # around DDP (as PyTorch recommends: its optimizer then splits the graph at the
        # gradient buckets); checkpoints and the EMA keep reading the model itself
        model.keep_layout_eager()
        module = torch.compile(module)
    return module


def run_segment(args: TrainArgs, env: DistEnv) -> int:
    """Train one segment on this rank; returns the number of completed steps of the run.
    PyTorch's deterministic mode, which the segment sets on CUDA, is as before afterwards."""
    with restored_mode():
        return _run_segment(args, env)


def _run_segment(args: TrainArgs, env: DistEnv) -> int:
    config = load_run_config(args.config)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    segment = Segment(args, config, env)
    segment.resume()
    start, stop = segment.start_step, segment.stop_step()
    segment.check_data(stop)
    segment.choose_attention()
    if env.is_main:
        _write_run_files(args.run_dir, config)
    log = SegmentLog(args.run_dir, start, stop, segment.global_batch, enabled=env.is_main)
    try:
        if start >= stop:
            log.summary(f"nothing to train: the run is at step {start} of {stop}")
            return start
        module = _training_module(segment.state.model, env, config.training)
        origin = f"resumed from {segment.resumed_from}" if segment.resumed_from else "new run"
        log.summary(
            f"training steps {start}..{stop - 1} of {segment.plan.total_steps} ({origin}); "
            f"{env.world_size} process(es) on {env.device}, attention {segment.attention}; "
            f"run dir {args.run_dir}"
        )
        log.event("start", start, stop=stop, origin=origin, world_size=env.world_size,
                  device=str(env.device), attention=segment.attention)
        return _SegmentSteps(segment, module, log, start, stop).run()
    finally:
        log.close()


class _SegmentSteps:
    """The steps of a segment and what follows each: logging, validation, checkpoints, and
    the end of the segment (its last step, a signal, the time limit or too many skips)."""

    def __init__(
        self, segment: Segment, module: torch.nn.Module, log: SegmentLog, start: int, stop: int
    ) -> None:
        self.segment, self.module, self.log = segment, module, log
        self.start, self.stop = start, stop
        self.training = segment.config.training
        self.clock = clock_from_env(segment.env.rank)
        self.budget = _time_budget(segment.args, self.clock)
        self.stop_flag = StopFlag()
        self.step = (DdpStep if segment.units is None else UnitStep).of(
            segment.state, module, segment.config, segment.env, segment.plan, segment.units)

    def run(self) -> int:
        """Train the steps; returns the number of completed steps of the run."""
        segment, env = self.segment, self.segment.env
        self.stop_flag.install()
        completed = self.start
        thread_setup = None
        if env.device.type == "cuda":
            def thread_setup() -> None:
                torch.cuda.set_device(env.device)
        loader = StepLoader(
            segment.prepare_step, self.start, self.stop, self.training.prefetch_steps,
            thread_setup, self.step.capture_guard,
        )
        try:
            for global_step in range(self.start, self.stop):
                result = self._step(loader, global_step)
                completed = global_step + 1
                self._after_step(completed, result)
                if result.stop:
                    self.log.stopped(completed, result.stop_reason)
                    break
        finally:
            loader.close()
            self.stop_flag.uninstall()
        return completed

    def _step(self, loader: StepLoader, global_step: int) -> StepResult:
        """Train ``global_step`` and count it into the log and the time budget."""
        segment = self.segment
        step_began = self.clock.now()
        self.clock.step_started()
        began = time.perf_counter()
        waited = loader.wait_seconds
        data = next(loader)
        data_wait = loader.wait_seconds - waited
        result = self.step.train(data, lambda: self.stop_flag.requested,
                                 self._time_up_after(global_step))
        seconds = time.perf_counter() - began
        if self.budget is not None:
            self.budget.record_step(self.clock.now() - step_began)
        counters = segment.state.counters
        self.log.step_trained(global_step + 1, result, seconds, data_wait,
                              counters.consecutive_skips)
        return result

    def _after_step(self, completed: int, result: StepResult) -> None:
        counters = self.segment.state.counters
        limit = self.training.max_consecutive_skips
        if result.skipped and counters.consecutive_skips >= limit:
            raise TrainingStopped(
                f"{counters.consecutive_skips} consecutive steps had a non-finite loss or "
                f"gradient (limit training.max_consecutive_skips={limit}); stopping at step "
                f"{completed}. The last checkpoint holds the state before the divergence."
            )
        record = completed % self.training.log_every == 0 or completed == self.stop
        self.log.step_done(completed, result, counters.skipped_total, record)
        if self.segment.validates_at(completed):
            began = self.clock.now()
            summary = self.segment.validate()
            if self.budget is not None:
                self.budget.record_validation(self.clock.now() - began)
            self.log.validation(completed, summary)
        if (
            completed % self.training.checkpoint_every == 0
            or completed == self.stop
            or result.stop
        ):
            began = self.clock.now()
            path = self.segment.save_checkpoint(completed)
            if self.budget is not None:
                self.budget.record_checkpoint(self.clock.now() - began)
            if path is not None:
                self.log.event("checkpoint", completed, path=str(path))

    def _time_up_after(self, global_step: int) -> Callable[[], bool]:
        """Asked during ``global_step``: must it be the segment's last, for the time limit?"""
        segment, budget = self.segment, self.budget

        def ask() -> bool:
            if budget is None or global_step + 1 >= self.stop:
                return False  # no limit, or the segment's end anyway
            this, following = global_step + 1, global_step + 2  # completed-step counts
            return budget.must_stop(
                validations=int(segment.validates_at(this))
                + int(segment.validates_at(following)),
                checkpoints=int(this % self.training.checkpoint_every == 0),
                validation_steps=len(segment.validation_set.tasks) / segment.global_batch,
            )

        return ask
