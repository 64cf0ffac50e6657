"""The run configuration: one YAML file -> ``RunConfig`` (all sections, strictly validated).

``seed``, ``prior``, ``curriculum`` and ``shards`` are the prior generator's sections
(``prior_gen.config``), ``model`` is ``puicl_model.net.config.ModelConfig``; ``training`` and
``validation`` are defined here. Every section goes through ``puicl_common.configio``, so an
unknown key, a wrong type or an out-of-range value is a ``ConfigError`` naming the dotted key.
Defaults are the paper's (§5); ``configs/paper.yaml`` spells them out anyway.

Options taken out after the recipe study (docs/recipe.md: the Muon optimizer, the
warmup-stable-decay schedule, the mean of the last checkpoints; none beat AdamW at a higher
rate) are listed on the sections that held them (``REMOVED_KEYS``, with the value under which
the trainer did what it does today): ``from_mapping`` drops such a key at that value, so run
directories and checkpoints written before the removal still load and resume, and refuses any
other value in one line naming the key (the versioning rule, :mod:`puicl_common.versioning`).
Their training hashes never held these keys at these values (:func:`training_identity`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from prior_gen.config import CurriculumConfig, GenerationConfig, PriorConfig, ShardConfig
from puicl_common.configio import (
    ConfigError,
    config_hash,
    file_setting,
    from_mapping,
    load_yaml,
    require,
    to_dict,
)
from puicl_common.runtime import PRECISION_ALIASES
from puicl_model.net.config import ModelConfig

SamplerName = Literal["sequential", "shuffled", "uniform", "final_stage"]
StageName = int | Literal["tail"]


@dataclass(frozen=True)
class PhaseSchedule:
    """Learning-rate schedule of one phase: linear warmup, then polynomial decay to a floor."""

    peak_lr: float
    floor_lr: float
    warmup_steps: int
    decay_power: float = 1.5

    def validate(self) -> None:
        require(self.peak_lr > 0, "peak_lr", f"must be positive, got {self.peak_lr}")
        require(0 <= self.floor_lr <= self.peak_lr, "floor_lr",
                f"must be in [0, peak_lr={self.peak_lr}], got {self.floor_lr}")
        require(
            self.warmup_steps >= 0, "warmup_steps", f"must be >= 0, got {self.warmup_steps}"
        )
        require(self.decay_power > 0, "decay_power", f"must be positive, got {self.decay_power}")


@dataclass(frozen=True)
class UnitShapes:
    """The padded shapes of the unit step's micro-batches (``training.unit_shapes``): the
    smallest listed row and feature counts that hold the tasks (beyond the last row count, a
    multiple of it); masks keep each task to its own rows and features (``trainer.units``).
    Sizes about √2 apart: on the paper's stages 1.34-1.46x the tasks' cells, 14-20 shapes a
    stage (doubling: 1.58-1.78x, 10-12; docs/performance.md, speed/unit_shapes.py)."""

    rows: tuple[int, ...] = (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
                             4096)
    features: tuple[int, ...] = (8, 12, 16, 20)

    def validate(self) -> None:
        for name in ("rows", "features"):
            values = getattr(self, name)
            require(
                len(values) > 0 and all(v > 0 for v in values)
                and all(a < b for a, b in itertools.pairwise(values)),
                name,
                f"must be increasing positive sizes, got {list(values)}",
            )


_STUDY = "which was taken out after the recipe study (docs/recipe.md)"
_MUON = f"this key belonged to the Muon optimizer (the trainer uses AdamW), {_STUDY}"
_WSD = (f"this key belonged to the warmup-stable-decay schedule (the trainer uses the "
        f"phase1/phase2 schedules), {_STUDY}")
_AVERAGE = f"this key belonged to checkpoint averaging (export writes the EMA weights), {_STUDY}"


@dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer (paper §5: AdamW) and gradient clipping."""

    REMOVED_KEYS: ClassVar[dict[str, Any]] = {
        "name": "adamw", "muon_lr": 1e-3, "muon_momentum": 0.95, "muon_nesterov": True,
        "muon_weight_decay": 0.01, "muon_ns_steps": 5, "muon_adjust_lr": "match_rms_adamw",
    }
    REMOVED_WHY: ClassVar[str] = _MUON

    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 1e-4  # applied to every AdamW parameter, as in the reference
    grad_clip: float = 1.0  # max L2 norm of the whole gradient; 0 turns clipping off

    def validate(self) -> None:
        require(0 <= self.beta1 < 1, "beta1", f"must be in [0, 1), got {self.beta1}")
        require(0 <= self.beta2 < 1, "beta2", f"must be in [0, 1), got {self.beta2}")
        require(self.eps > 0, "eps", f"must be positive, got {self.eps}")
        require(self.weight_decay >= 0, "weight_decay", f"must be >= 0, got {self.weight_decay}")
        require(self.grad_clip >= 0, "grad_clip", f"must be >= 0, got {self.grad_clip}")


def _phase1_default() -> PhaseSchedule:
    return PhaseSchedule(peak_lr=1.6e-4, floor_lr=1.6e-5, warmup_steps=4000, decay_power=1.5)


def _phase2_default() -> PhaseSchedule:
    return PhaseSchedule(peak_lr=4e-5, floor_lr=4e-6, warmup_steps=2000, decay_power=1.5)


@dataclass(frozen=True)
class TrainingConfig:
    """How the model is trained: data order, optimizer, schedule, EMA, batching, bookkeeping."""

    REMOVED_KEYS: ClassVar[dict[str, Any]] = {
        "schedule": "warmup_power",
        "wsd": {"peak_lr": 1e-3, "floor_lr": 0.0, "warmup_steps": 100, "decay_fraction": 0.2,
                "decay_shape": "linear"},
        "average": "ema",
        "average_last": 10,
    }
    REMOVED_WHY: ClassVar[dict[str, str]] = {
        "schedule": _WSD, "wsd": _WSD, "average": _AVERAGE, "average_last": _AVERAGE,
    }

    # how global steps map to stored steps: "sequential" is the paper's curriculum; the others
    # are ablations on the same shards (see trainer.sampler)
    sampler: SamplerName = "sequential"
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    phase1: PhaseSchedule = field(default_factory=_phase1_default)
    phase2: PhaseSchedule = field(default_factory=_phase2_default)
    ema_decay: float = 0.95  # the EMA weights are what is validated and exported
    # A rank cuts its tasks into micro-batches of at most micro_batch_size tasks and (unless
    # null) micro_batch_cells table cells, accumulating gradients over them: this bounds the
    # activation memory without changing the objective.
    micro_batch_size: int = 8
    micro_batch_cells: int | None = None
    group_by_rows: bool = True  # order a rank's tasks by row count before cutting
    # recompute each block in the backward pass instead of storing its activations
    activation_checkpointing: bool = False
    # the attention backend (puicl_model.net.backends): auto | packed | cpu_kernel | bucketed |
    # bucketed_matmul | padded (a fixed-shape block with masks; auto's with unit_shapes).
    # "auto" is resolved once when a run starts (bucketed_matmul on a GPU; on CPU cpu_kernel
    # only where it was measured faster on this CPU, else packed) and the result is recorded in
    # every checkpoint: a resumed run keeps its backend, since backends differ in float
    # rounding (a run started when auto meant bucketed on a GPU goes on with bucketed).
    attention: Literal["auto", "packed", "cpu_kernel", "bucketed", "bucketed_matmul",
                       "padded"] = "auto"
    # after a step that leaves this process holding more than this many GB, hand the
    # allocator's free pages back to the system (trainer.heap; glibc). The heap otherwise
    # keeps every page it ever touched, and with steps of varying sizes it grows well past
    # the heaviest step's peak. 0 trims after every step (~6 % of the time, in page faults);
    # a cap trims only when it is reached (no measurable cost at paper.yaml's 2.0 GB per
    # process; docs/performance.md, Trainer). null: never.
    release_memory_above_gb: float | None = None
    # "auto": bfloat16 autocast on CUDA, float32 on CPU (puicl_common.runtime); fp32 and bf16,
    # the spellings of configs written before, are aliases of float32 and bfloat16
    precision: Literal["auto", "float32", "bfloat16", "fp32", "bf16"] = "auto"
    # run the model under torch.compile (applied by the trainer, around DDP); changes float
    # rounding only, like the micro-batch layout, so it may differ between segments
    compile: bool = False
    # strict deterministic kernels on CUDA (trainer.determinism): two runs of one config, and a
    # resumed run, end with identical weights on the same GPU model, software and world size.
    # Off trains with PyTorch's default kernels (flash attention's backward is then
    # non-deterministic). No effect on CPU, whose kernels are deterministic already. It
    # changes float rounding only, so it stays out of the run's identity; a resume that
    # switches it is allowed, with a warning that the run is then not reproducible bit for bit
    deterministic: bool = True
    # with deterministic kernels, PyTorch also fills every new uninitialized tensor with a known
    # value (torch.utils.deterministic.fill_uninitialized_memory): a guard against reading
    # memory before writing it, one fill kernel per new tensor. false drops those fills (fill
    # kernels, these and the model's own zeros, were 7-11 % of the GPU's time in a step of the
    # paper's model on an H100: docs/performance.md, "GPU"); the kernels stay deterministic.
    # Like deterministic, out of the run's identity
    deterministic_fill: bool = True
    # steps whose data a background thread reads and collates ahead of the step computing
    # (trainer.loader); 0 reads each step's data in the main thread when the step begins.
    # The same data either way: a run's weights do not depend on it
    prefetch_steps: int = 2
    max_consecutive_skips: int = 10  # non-finite steps in a row before the run stops
    # start from these weights (a weights directory or .safetensors file, as `trainer export`
    # writes them; a relative path counts from the working directory) instead of the seed's
    # random initialisation: a fine-tuning run. Only the model's weights are taken; optimizer,
    # EMA and schedule start afresh. The weights' checksum, not the path, enters the run's
    # identity, so a moved file still resumes the run and a changed one is refused.
    init_weights: str | None = None
    # How a step's gradient is summed (docs/training.md §6). "all_reduce" (legacy): DDP's, whose
    # bits depend on the world size. "units": step_units units of tasks, each unit's gradient
    # gathered as bytes and added in unit order on every rank (trainer.units): the same bits on
    # any process count dividing step_units, at one threads-per-process on CPU. The unit keys
    # below belong to "units"; padding and graphs change float rounding only (not identity):
    # unit_shapes pads each micro-batch of a unit to a fixed shape (the padded attention);
    # unit_graphs runs a shape's forward and backward as one compiled or CUDA graph
    gradient_sum: Literal["all_reduce", "units"] = "all_reduce"
    step_units: int | None = None  # units of a step: global_batch / step_units tasks each
    unit_shapes: UnitShapes | None = None
    unit_graphs: Literal["none", "compile", "cuda_graphs"] = "none"
    checkpoint_every: int = 1000  # steps; a checkpoint is also written when a segment ends
    keep_checkpoints: int = 3  # the newest K checkpoints are kept
    log_every: int = 50  # steps per JSONL record / console summary line

    def validate(self) -> None:
        require(
            0 <= self.ema_decay < 1, "ema_decay", f"must be in [0, 1), got {self.ema_decay}"
        )
        require(
            self.micro_batch_size > 0,
            "micro_batch_size",
            f"must be positive, got {self.micro_batch_size}",
        )
        require(
            self.micro_batch_cells is None or self.micro_batch_cells > 0,
            "micro_batch_cells",
            f"must be positive or null, got {self.micro_batch_cells}",
        )
        require(
            self.release_memory_above_gb is None or self.release_memory_above_gb >= 0,
            "release_memory_above_gb",
            f"must be >= 0 or null, got {self.release_memory_above_gb}",
        )
        require(
            self.prefetch_steps >= 0,
            "prefetch_steps",
            f"must be >= 0, got {self.prefetch_steps}",
        )
        require(
            self.max_consecutive_skips > 0,
            "max_consecutive_skips",
            f"must be positive, got {self.max_consecutive_skips}",
        )
        require(
            self.checkpoint_every > 0,
            "checkpoint_every",
            f"must be positive, got {self.checkpoint_every}",
        )
        require(
            self.keep_checkpoints > 0,
            "keep_checkpoints",
            f"must be positive, got {self.keep_checkpoints}",
        )
        require(self.log_every > 0, "log_every", f"must be positive, got {self.log_every}")
        self._validate_units()
        require(
            self.init_weights is None or self.init_weights.strip() != "",
            "init_weights",
            "must be a weights path or null, got an empty string",
        )


    def _validate_units(self) -> None:
        if self.gradient_sum == "all_reduce":
            for key, unset in (("step_units", None), ("unit_shapes", None),
                               ("unit_graphs", "none")):
                require(getattr(self, key) == unset, key,
                        "belongs to the unit step: set gradient_sum: units, or leave it out")
            return
        require(self.step_units is not None, "step_units",
                "gradient_sum: units needs the number of units of a step")
        require(self.step_units > 0, "step_units", f"must be positive, got {self.step_units}")
        if self.unit_graphs != "none":
            require(self.unit_shapes is not None, "unit_graphs",
                    f"{self.unit_graphs} needs fixed shapes: set unit_shapes")
            require(not (self.compile or self.activation_checkpointing), "unit_graphs",
                    f"{self.unit_graphs} runs graphs of its own, unprepared for compile: true "
                    "or activation_checkpointing: true; set both false")


@dataclass(frozen=True)
class ValidationConfig:
    """Periodic validation of the EMA weights on the held-out split (``prior-gen --split val``)."""

    every_steps: int = 1000  # 0 turns periodic validation off
    # stages of the val split to validate on; steps 0..steps_per_stage-1 of each
    stages: tuple[StageName, ...] = (1, 50, 100, "tail")
    steps_per_stage: int = 1
    batch_size: int = 8  # tasks per forward pass
    # edges of the realized-π buckets for the per-bucket AUC (π = negative share of the pool)
    pi_buckets: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 1.0)

    def validate(self) -> None:
        require(self.every_steps >= 0, "every_steps", f"must be >= 0, got {self.every_steps}")
        require(len(self.stages) > 0, "stages", "must list at least one stage")
        require(
            self.steps_per_stage > 0,
            "steps_per_stage",
            f"must be positive, got {self.steps_per_stage}",
        )
        require(self.batch_size > 0, "batch_size", f"must be positive, got {self.batch_size}")
        edges = self.pi_buckets
        require(
            len(edges) >= 2 and all(a < b for a, b in itertools.pairwise(edges)),
            "pi_buckets",
            f"must be at least two increasing edges, got {list(edges)}",
        )
        require(
            edges[0] <= 0.0 and edges[-1] >= 1.0,
            "pi_buckets",
            f"must cover [0, 1] (first edge <= 0, last >= 1), got {list(edges)}",
        )


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run needs; the top-level keys of ``configs/*.yaml``."""

    seed: int = 0
    prior: PriorConfig = field(default_factory=PriorConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    shards: ShardConfig = field(default_factory=ShardConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def validate(self) -> None:
        self.generation().validate()  # the seed's range, as prior-gen checks it
        # the classifier cuts wider tables into groups of max_features: the widest task seen
        # in training must fit
        widest, max_features = self.prior.dataset.n_features[1], self.model.max_features
        require(
            widest <= max_features,
            "prior.dataset.n_features",
            f"tasks of up to {widest} features exceed model.max_features = {max_features}; "
            "raise model.max_features or narrow the tasks",
        )
        training = self.training
        if training.gradient_sum == "units":
            batch = self.curriculum.global_batch
            require(
                batch % training.step_units == 0,
                "training.step_units",
                f"{training.step_units} units do not split the global batch of {batch} tasks "
                "(curriculum.global_batch) evenly; use a divisor of it",
            )
            shapes, tasks = training.unit_shapes, self.prior.dataset.n_features[1]
            require(shapes is None or shapes.features[-1] >= tasks,
                    "training.unit_shapes.features", f"the widest shape holds "
                    f"{shapes and shapes.features[-1]} features, the tasks up to {tasks}")
        num_stages = self.curriculum.stages
        for i, stage in enumerate(self.validation.stages):
            if stage != "tail":
                require(
                    1 <= stage <= num_stages,
                    f"validation.stages[{i}]",
                    f"stage {stage} is outside 1..{num_stages} of the curriculum",
                )

    def generation(self) -> GenerationConfig:
        """The prior generator's view of this run (what the shard manifest was made from)."""
        return GenerationConfig(
            seed=self.seed, prior=self.prior, curriculum=self.curriculum, shards=self.shards
        )

    def training_hash(self) -> str:
        """Hash of everything that decides the trained weights (checked when resuming).

        Bookkeeping (checkpoint cadence, logging, validation, shard storage format) and the
        micro-batch layout (which changes float rounding only) are left out, so they may
        change between the segments of one run; options left at their legacy values are left
        out too (:func:`training_identity`).
        """
        training = self.training
        identity = {
            # the data's identity as prior_gen defines it (with its legacy-key rule), so a
            # prior key added later changes neither shard nor checkpoint hashes of old configs
            **self.generation().identity(),
            "model": self.model.to_mapping(),
            "training": training_identity(training),
        }
        return config_hash(identity)


_HASHED_PRECISION = {canonical: alias for alias, canonical in PRECISION_ALIASES.items()}


def training_identity(training: TrainingConfig) -> dict[str, Any]:
    """The training fields that decide the weights, for ``RunConfig.training_hash``.

    Versioning rule (as the ``LEGACY_VALUES`` of the prior's sections): an option added after
    runs were made enters the identity only when it leaves today's behaviour, so every config
    that keeps it keeps its hash and can resume its checkpoints. Options since removed never
    entered it at the values that remain (the sections' ``REMOVED_KEYS``), so removing them
    changed no hash. ``gradient_sum`` enters at ``units``, with ``step_units`` (its legacy
    value ``all_reduce`` is the DDP step every run before it trained with); the unit's
    padding and graphs (``unit_shapes``, ``unit_graphs``) change float rounding only and stay
    out, as the micro-batch layout does.
    """
    identity: dict[str, Any] = {
        "sampler": training.sampler,
        "optimizer": training.optimizer,
        "phase1": training.phase1,
        "phase2": training.phase2,
        "ema_decay": training.ema_decay,
        # spelled as configs spelled it when the hash was defined, so both spellings of a
        # precision give one hash and old runs keep theirs
        "precision": _HASHED_PRECISION.get(training.precision, training.precision),
    }
    if training.gradient_sum != "all_reduce":  # the unit step's cut decides its bits
        identity["gradient_sum"] = training.gradient_sum
        identity["step_units"] = training.step_units
    if training.init_weights is not None:
        identity["init_weights_sha256"] = init_weights_digest(training.init_weights)
    return identity


def init_weights_digest(path: str | Path) -> str:
    """The tensor checksum of the weights at ``path`` (``training.init_weights``)."""
    from puicl_model.net.weights import WeightsError, stored_checksum

    try:
        return stored_checksum(path)
    except WeightsError as err:
        raise ConfigError("training.init_weights", str(err)) from None


def run_config_from_mapping(data: Any) -> RunConfig:
    """Build and validate a ``RunConfig`` from a parsed YAML mapping; a key of a removed
    option is refused, or dropped at its legacy value (the sections' ``REMOVED_KEYS``)."""
    return from_mapping(RunConfig, data)


def load_run_config(path: str | Path) -> RunConfig:
    """Read a run config file; every problem is a ``ConfigError`` naming file and key."""
    data = load_yaml(path)
    try:
        return run_config_from_mapping(data)
    except ConfigError as err:
        # a key set by a base file is named with that file
        raise ConfigError(err.key, f"{err.message} (in {file_setting(path, err.key)})") \
            from None


def run_config_to_dict(config: RunConfig) -> dict[str, Any]:
    """Plain-JSON form of a config (stored in checkpoints and the run directory)."""
    return to_dict(config)
