"""Tasks/s of each way to run a training step, side by side, on the stages' real shards.

One process, one device; for each stage and each variant, the trainer's own step runs on steps
0..N-1 of that stage (read from ``--shards``, collated as the trainer collates them) from the
run's initial weights:

* ``ddp``      -- ``training.gradient_sum: all_reduce``, the DDP step (``trainer.step``;
                  alone, DDP adds nothing), micro-batches as the config cuts them;
* ``units``    -- ``gradient_sum: units`` (``trainer.unit_step``), the config's ``step_units``
                  (``units:N`` for N units);
* ``padded``   -- ``units`` with each micro-batch in a padded shape (``unit_shapes``, the
                  default set: ``trainer.config.UnitShapes``) and the ``padded`` attention;
* ``compile``  -- ``padded`` with ``unit_graphs: compile``, one compiled graph per shape;
* ``graphs``   -- ``padded`` with ``unit_graphs: cuda_graphs`` (CUDA only).

Each variant runs the N steps twice: the first pass meets every shape (kernel choice,
compilation, graph capture: its seconds are printed), the second is timed for the figure,
tasks/s with the device synchronised around each step and the data already collated (the
trainer's loader reads ahead: its wait is measured by the trainer's runs). A variant stops
after the step in progress once it has used its time (``--seconds``, or its share of what is
left of ``--budget``); without a second pass it has no figure. Then the same variant runs
``--repeat-steps`` steps again from the same initial weights on the same data: ``run to run
IDENTICAL`` when the weights after them equal the first pass's after as many steps, bit for
bit.

    python -m speed.step_variants --config configs/paper.yaml --shards shards/paper \\
        --stages 1,50,100 --steps 12 --variants ddp,units,padded,compile,graphs --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from prior_gen.paper.curriculum import StepAddress
from prior_gen.shards import open_shards
from puicl_common.configio import load_yaml, merge_mappings
from trainer.attention import choose_attention
from trainer.batching import assemble_micro_batches, plan_micro_batches
from trainer.config import RunConfig, run_config_from_mapping
from trainer.determinism import apply_determinism, restored_mode
from trainer.dist_env import DistEnv
from trainer.ema import WeightEMA
from trainer.loader import StepData
from trainer.optimizers import build_optimizer
from trainer.sampler import RunPlan
from trainer.state import TrainingState
from trainer.step import train_step
from trainer.unit_graphs import UnitForward
from trainer.unit_step import UnitStep
from trainer.units import UnitPlan, rank_units

VARIANTS = ("ddp", "units", "padded", "compile", "graphs")


def variant_training(name: str) -> dict[str, Any]:
    """The ``training`` keys a variant sets over the base config."""
    base, _, count = name.partition(":")
    if base not in VARIANTS or (count and not (count.isdigit() and int(count) > 0)):
        raise ValueError(f"unknown variant {name!r}: one of {', '.join(VARIANTS)}, or units:N")
    if base == "ddp":
        return {"gradient_sum": "all_reduce", "step_units": None, "unit_shapes": None,
                "unit_graphs": "none"}
    keys: dict[str, Any] = {"gradient_sum": "units", "unit_shapes": None, "unit_graphs": "none"}
    if count:
        keys["step_units"] = int(count)
    if base in ("padded", "compile", "graphs"):
        keys.update(unit_shapes={}, attention="padded")  # {}: UnitShapes' defaults
    if base == "compile":
        keys["unit_graphs"] = "compile"
    if base == "graphs":
        keys["unit_graphs"] = "cuda_graphs"
    return keys


def variant_config(base: dict[str, Any], name: str) -> RunConfig:
    training = dict(base.get("training") or {})
    keys = variant_training(name)
    if keys["gradient_sum"] == "units" and "step_units" not in keys \
            and training.get("step_units") is None:
        keys["step_units"] = 4
    return run_config_from_mapping(merge_mappings(base, {"training": {**training, **keys}}))


@dataclass
class Measured:
    tasks_per_s: float | None  # over the second pass (None: it did not run)
    first_pass_s: float  # the first pass over the steps: kernel choice, compiling, capturing
    steps: int  # steps of the second pass
    peak_gb: float | None
    run_to_run: str


class _Variant:
    """One variant's model, optimizer, EMA and step on one device."""

    def __init__(self, config: RunConfig, env: DistEnv) -> None:
        self.config, self.env = config, env
        self.state = TrainingState.initial(config, env.device)
        self.initial = {k: v.clone() for k, v in self.state.model.state_dict().items()}
        self.state.set_attention(choose_attention(config, env, None))
        self.plan = RunPlan.from_curriculum(config.curriculum)
        training = config.training
        self.units = None
        if training.gradient_sum == "units":
            self.units = UnitPlan(config.curriculum.global_batch, training.step_units, 1, 0)
            forward = UnitForward(self.state.model, self.state.model, training, env.device)
            self.unit_step = UnitStep(self.state, forward, config, env, self.plan, self.units)

    def reset(self) -> None:
        """The initial weights again (in place: compiled and captured graphs stay valid), a
        fresh optimizer and EMA."""
        state, training = self.state, self.config.training
        state.model.load_state_dict(self.initial)
        state.ema = WeightEMA(state.model, training.ema_decay)
        state.ema.module.attention = state.model.attention
        state.optimizer = build_optimizer(state.model, training)
        if self.units is not None:
            self.unit_step.state = state

    def data(self, tasks: list, global_step: int, address: StepAddress) -> StepData:
        training, pin = self.config.training, self.env.device.type == "cuda"
        if self.units is not None:
            return StepData(global_step, address, [],
                            rank_units(tasks, self.units, training, pin))
        groups = plan_micro_batches([t.x.shape[0] for t in tasks], [t.x.shape[1] for t in tasks],
                                    training.micro_batch_size, training.micro_batch_cells,
                                    training.group_by_rows)
        return StepData(global_step, address, assemble_micro_batches(tasks, groups, pin))

    def step(self, data: StepData) -> None:
        if self.units is not None:
            self.unit_step.train(data, lambda: False)
        else:
            train_step(self.state, data, self.state.model, self.config, self.env, self.plan,
                       stop_requested=lambda: False)

    def digest(self) -> str:
        sha = hashlib.sha256()
        for name, tensor in sorted(self.state.model.state_dict().items()):
            sha.update(name.encode())
            sha.update(tensor.detach().cpu().numpy().tobytes())
        return sha.hexdigest()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(variant: _Variant, batches: list[StepData], limit: float, repeat: int) -> Measured:
    """Two passes over ``batches`` (the second timed for the figure) within ``limit`` seconds,
    then ``repeat`` steps again from the initial weights (outside the limit)."""
    device = variant.env.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    began, reference = time.perf_counter(), None

    def timed(data: StepData) -> float:
        _synchronize(device)
        start = time.perf_counter()
        variant.step(data)
        _synchronize(device)
        return time.perf_counter() - start

    first: list[float] = []
    for index, data in enumerate(batches):
        first.append(timed(data))
        if index + 1 == repeat:
            reference = variant.digest()
        if time.perf_counter() - began > limit:
            break
    second: list[float] = []
    if len(first) == len(batches):  # every shape met: the second pass is the steady state
        for data in batches:
            if time.perf_counter() - began > limit:
                break
            second.append(timed(data))
    peak = torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None
    tasks = variant.config.curriculum.global_batch
    rate = tasks * len(second) / sum(second) if second else None
    verdict = "not checked"
    if reference is not None:
        variant.reset()
        for data in batches[:repeat]:
            variant.step(data)
        verdict = "IDENTICAL" if variant.digest() == reference else "DIFFERENT"
    return Measured(rate, sum(first), len(second), peak, verdict)


def _line(stage: str, name: str, got: Measured) -> str:
    rate = "no second pass" if got.tasks_per_s is None else f"{got.tasks_per_s:.1f} tasks/s"
    peak = "" if got.peak_gb is None else f", peak {got.peak_gb:.2f} GB"
    return (f"stage {stage}, {name}: {rate} ({got.steps} steps of the second pass, the first "
            f"{got.first_pass_s:.1f} s{peak}), run to run {got.run_to_run}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.step_variants",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--shards", type=Path, required=True)
    parser.add_argument("--stages", default="1", help="comma-separated stages (1..K, tail)")
    parser.add_argument("--steps", type=int, default=12, help="steps per stage and variant")
    parser.add_argument("--variants", default="ddp,units,padded")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="at most this long per stage and variant (then the step ends)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="seconds for everything (0: no limit); each stage and variant "
                        "gets at most its share of what is left")
    parser.add_argument("--repeat-steps", type=int, default=3,
                        help="steps run again from the initial weights for the run-to-run check")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    env = DistEnv(0, 1, 0, device, None)
    base = load_yaml(args.config)
    reader = open_shards(args.shards, split="train")
    names = args.variants.split(",")
    stages = args.stages.split(",")
    table: dict[str, dict[str, Measured]] = {}
    started, items_left = time.perf_counter(), len(stages) * len(names)
    # compiling can take longer than a variant's share: the compiled variants come last
    order = [(stage, name) for late in (False, True) for stage in stages for name in names
             if name.startswith("compile") == late]
    steps: dict[str, list] = {}
    for stage_text, name in order:
        stage: int | str = stage_text if stage_text == "tail" else int(stage_text)
        limit = args.seconds
        if args.budget > 0:
            left = args.budget - (time.perf_counter() - started)
            limit = min(limit, left / items_left)
        items_left -= 1
        if name.startswith("graphs") and device.type != "cuda":
            print(f"stage {stage}, {name}: skipped (CUDA graphs need a GPU)", flush=True)
            continue
        if limit <= 0:
            print(f"stage {stage}, {name}: skipped, out of time", flush=True)
            continue
        if stage_text not in steps:
            steps[stage_text] = [reader.read_step(stage, step) for step in range(args.steps)]
        table.setdefault(name, {})[stage_text] = got = _measure_variant(
            variant_config(base, name), env, stage, steps[stage_text], limit, args.repeat_steps)
        print(_line(stage_text, name, got), flush=True)
    _print_table(table, stages)
    return 0


def _measure_variant(config: RunConfig, env: DistEnv, stage: int | str, steps: list,
                     limit: float, repeat: int) -> Measured:
    """One variant on one stage's steps (their tasks, read), under its deterministic mode."""
    with _deterministic(config, env.device):
        variant = _Variant(config, env)
        phase = 2 if stage == "tail" else 1
        batches = [variant.data(tasks, i, StepAddress(phase, stage, i))
                   for i, tasks in enumerate(steps)]
        got = measure(variant, batches, limit, min(repeat, len(batches)))
    del variant, batches
    if env.device.type == "cuda":
        torch.cuda.empty_cache()
    return got


@contextlib.contextmanager
def _deterministic(config: RunConfig, device: torch.device) -> Iterator[None]:
    """The trainer's deterministic mode for the variant (``training.deterministic``), as it
    was before afterwards."""
    with restored_mode():
        apply_determinism(config.training.deterministic, device,
                          config.training.deterministic_fill)
        yield


def _print_table(table: dict[str, dict[str, Measured]], stages: list[str]) -> None:
    print("| variant | " + " | ".join(f"stage {s} tasks/s" for s in stages) + " | run to run |")
    print("|---|" + "---:|" * len(stages) + "---|")
    for name, by_stage in table.items():
        cells = []
        for stage in stages:
            got = by_stage.get(stage)
            cells.append("—" if got is None or got.tasks_per_s is None
                         else f"{got.tasks_per_s:.1f}")
        verdicts = sorted({got.run_to_run for got in by_stage.values()})
        print(f"| {name} | " + " | ".join(cells) + f" | {', '.join(verdicts)} |")


if __name__ == "__main__":
    sys.exit(main())
