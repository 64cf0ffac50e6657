"""Where a training step's time goes: ``torch.profiler`` over a few steps of the real trainer.

Runs ``trainer/main.py``'s segment in this process (``--config``, ``--shards``, a fresh
``--run-dir``) and profiles its steps after ``--warmup`` steps (the first ones choose kernels
and fill caches), advancing the profiler's schedule from the step's hook point
(``trainer.hooks``), so the trainer runs exactly as it does without the profiler. Prints the
``--rows`` operations with the most self time on the device (CUDA: kernel time; CPU: CPU
time), then the share of that time spent in attention kernels and the kernels per step.

    python -m speed.profile_step --config configs/paper.yaml --shards shards/paper \
        --run-dir /tmp/profile_run --steps 6 --device cuda
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from torch.profiler import ProfilerActivity, profile, schedule

from trainer import hooks
from trainer.hooks import StepHook
from trainer.train import TrainArgs, train

# names of the kernels (CUDA) or operations (CPU) that are the attention itself; on CUDA the
# products of ``short_attention`` are cuBLAS kernels that this cannot tell from the
# projections', so its share counts only their softmax there
ATTENTION_MARKS = ("attention", "flash", "fmha", "softmax", "bmm")


class _ProfilerSteps(StepHook):
    def __init__(self, profiler: profile) -> None:
        self.profiler = profiler

    def step_begins(self) -> None:
        self.profiler.step()


def attention_share(events: list, device_time: str) -> float:
    """The share of the profiled self time in ``events`` whose name marks attention."""
    total = sum(getattr(e, device_time) for e in events)
    attention = sum(getattr(e, device_time) for e in events
                    if any(mark in e.key.lower() for mark in ATTENTION_MARKS))
    return attention / total if total else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed.profile_step",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--shards", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True,
                        help="a scratch run directory (replaced)")
    parser.add_argument("--steps", type=int, default=6, help="steps profiled")
    parser.add_argument("--warmup", type=int, default=3, help="steps before the profiled ones")
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    args = parser.parse_args(argv)
    shutil.rmtree(args.run_dir, ignore_errors=True)
    on_cuda = args.device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    # the hook advances the schedule at each step's start: the first call opens "wait"
    plan = schedule(wait=args.warmup, warmup=1, active=args.steps, repeat=1)
    profiler = profile(activities=activities, schedule=plan)
    with profiler, hooks.installed(lambda step, rank: _ProfilerSteps(profiler)):
        code = train(TrainArgs(config=args.config, shards=args.shards, run_dir=args.run_dir,
                               device=args.device, until_step=args.warmup + 1 + args.steps + 1))
    if code != 0:
        print(f"the trainer exited with {code}", file=sys.stderr)
        return code
    events = profiler.key_averages()
    device_time = "self_device_time_total" if on_cuda else "self_cpu_time_total"
    if on_cuda and not hasattr(events[0], device_time):  # torch < 2.4
        device_time = "self_cuda_time_total"
    print(events.table(sort_by=device_time, row_limit=args.rows, max_name_column_width=70))
    # on CUDA the kernels alone (an operation's self time repeats its kernels')
    counted = [e for e in events if not on_cuda or e.device_type.name == "CUDA"]
    kernels = sum(e.count for e in counted) if on_cuda else 0
    print(f"attention share of the self {'CUDA' if on_cuda else 'CPU'} time: "
          f"{100 * attention_share(counted, device_time):.1f} %"
          + (f"; {kernels / args.steps:.0f} kernels a step" if on_cuda else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
