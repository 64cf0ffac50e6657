"""Configuration of the prior generator: the ``seed``, ``prior``, ``curriculum`` and ``shards``
sections of a run config (``configs/paper.yaml``), as frozen dataclasses.

The defaults are the paper's values (§2, §5) and, where the paper is silent, the public
reference implementation's (``docs/architecture.md`` §6 lists each choice). Which factor is
drawn at which scope (once per stage, once per step = global batch, or once per task) is
configuration too (:class:`ScopeConfig`), with the paper's §5 assignment as the default.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from puicl_common.configio import (
    ConfigError,
    config_hash,
    from_mapping,
    identity_dict,
    load_yaml,
    require,
)

__all__ = [
    "ACTIVATION_NAMES",
    "FACTORS",
    "KNOWN_SECTIONS",
    "AnnealedRange",
    "CategoricalConfig",
    "CurriculumConfig",
    "DatasetConfig",
    "GenerationConfig",
    "ModeConfig",
    "PriorConfig",
    "RealTablesConfig",
    "SCMConfig",
    "ScopeConfig",
    "ShardConfig",
    "load_generation_config",
]

# Top-level sections a run config may hold. prior-gen validates the first four; the others
# belong to the model and the trainer, which validate them (docs/architecture.md §2).
KNOWN_SECTIONS = ("seed", "prior", "curriculum", "shards", "model", "training", "validation")

# The bank of §2.1, in the order used for codes stored in shards. Never reorder: task metadata
# refers to these names.
ACTIVATION_NAMES = (
    "tanh",
    "relu",
    "gelu",
    "identity",
    "sign",
    "heaviside",
    "rbf",
    "sine",
    "square",
    "abs",
)

Scope = Literal["stage", "step", "task"]

# Every factor that the curriculum draws, in slot order (prior_gen.paper.factors). The position of a
# name is its slot in each scope's block of uniforms: append new factors, never reorder.
FACTORS = (
    "depth",
    "width",
    "n_features",
    "n_labeled",
    "noise_std",
    "cause_dist",
    "activations",
    "noncausal_features",
    "label_block",
    "feature_selection",
    "feature_order",
    "causal",
    "eta",
    "pi",
)


# Mechanisms of the prior that lost the prior study (docs/recipe.md, "Prior v2") and were taken
# out; their code is at the git tag prior-study-2026-11. Each was absent (None) by default,
# which never entered a hash: a stored config that names one at None still loads with its
# hash, any other value is refused naming the key (the removed-key rule,
# puicl_common.versioning, which puicl_common.configio.from_mapping applies per section).
REMOVED_WHY = ("the mechanism lost the prior study (docs/recipe.md) and was taken out; its code "
               "is at the git tag prior-study-2026-11")


# The largest core sizes a config may ask for: far beyond every shipped config (the paper's
# depth 4-12, width 12-36, 20 causes, 100-300 labeled positives, η up to 2), and small enough
# that one task's SCM fits in memory (the largest: about 1 million rows × 1,024 hidden units
# per layer). docs/architecture.md §6 lists them.
MAX_DEPTH = 64
MAX_WIDTH = 1024
MAX_CAUSES = 1024
MAX_LABELED = 10_000
MAX_ETA = 100.0


def _int_range(value: tuple[int, int], key: str, minimum: int,
               maximum: int | None = None) -> None:
    lo, hi = value
    require(lo >= minimum, key, f"lower bound must be >= {minimum}, got {lo}")
    require(lo <= hi, key, f"lower bound {lo} is above upper bound {hi}")
    if maximum is not None:
        require(hi <= maximum, key, f"upper bound must be <= {maximum:,}, got {hi:,}")


def _at_least(value: float, key: str, minimum: float) -> None:
    require(value >= minimum, key, f"must be >= {minimum}, got {value}")


def _fraction(value: float, key: str) -> None:
    require(0.0 <= value <= 1.0, key, f"must lie in [0, 1], got {value}")


def _choices(values: tuple[Any, ...], key: str) -> None:
    require(len(values) > 0, key, "needs at least one choice")
    require(len(set(values)) == len(values), key, f"has a repeated choice: {list(values)}")


@dataclass(frozen=True)
class SCMConfig:
    """The random MLP of §2.1–2.2."""

    depth: tuple[int, int] = (4, 12)  # L_g: layers incl. the input layer -> L_g - 1 hidden blocks
    width: tuple[int, int] = (12, 36)  # h: hidden width
    n_causes: int = 20  # k (features = causes mode uses k = d instead)
    init_std: float = 0.8  # σ_init of every weight; biases are zero
    noise_std: tuple[float, ...] = (0.005, 0.01, 0.02)  # σ_noise choices
    cause_dist: tuple[Literal["normal", "uniform"], ...] = ("normal", "uniform")
    activations: tuple[str, ...] = ACTIVATION_NAMES  # the bank each layer draws from
    # per_layer: each hidden block draws its own function; shared: one function for all blocks
    activation_schedule: tuple[Literal["per_layer", "shared"], ...] = ("per_layer",)
    clip: float = 20.0  # standardized features and score are clipped to ±clip
    # the per-layer noise: box_muller (the original bytes; the default) or table (a normal
    # quantile table, ~4× faster: prior_gen.engine.noise_table)
    noise_sampler: Literal["box_muller", "table"] = "box_muller"
    # native (numpy + OpenBLAS: the original bytes, which differ between CPU models) or
    # portable (fixed-order kernels, the same bytes on every CPU: prior_gen.engine.portable;
    # every normal from the noise table, so it needs noise_sampler: table)
    arithmetic: Literal["native", "portable"] = "native"

    # Keys added after shards existed, each with the value that reproduces the bytes made
    # before it: left out of the hash while they hold it (puicl_common.versioning), so old
    # configs, shards and checkpoints keep their hash.
    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"noise_sampler": "box_muller",
                                               "arithmetic": "native"}
    REMOVED_KEYS: ClassVar[dict[str, Any]] = {"families": None}
    REMOVED_WHY: ClassVar[str] = REMOVED_WHY

    def validate(self) -> None:
        _int_range(self.depth, "depth", 2, MAX_DEPTH)
        _int_range(self.width, "width", 1, MAX_WIDTH)
        _at_least(self.n_causes, "n_causes", 1)
        require(self.n_causes <= MAX_CAUSES, "n_causes",
                f"must be <= {MAX_CAUSES:,}, got {self.n_causes:,}")
        require(self.init_std > 0, "init_std", f"must be positive, got {self.init_std}")
        _choices(self.noise_std, "noise_std")
        for value in self.noise_std:
            require(value >= 0, "noise_std", f"must be >= 0, got {value}")
        _choices(self.cause_dist, "cause_dist")
        _choices(self.activations, "activations")
        for name in self.activations:
            require(name in ACTIVATION_NAMES, "activations",
                    f"unknown activation {name!r} (known: {', '.join(ACTIVATION_NAMES)})")
        _choices(self.activation_schedule, "activation_schedule")
        require(self.clip > 0, "clip", f"must be positive, got {self.clip}")
        require(
            self.arithmetic == "native" or self.noise_sampler == "table",
            "arithmetic",
            "portable draws every normal from the quantile table: it needs noise_sampler: table",
        )


@dataclass(frozen=True)
class ModeConfig:
    """Feature-source modes (§2.2); each is a list of choices drawn uniformly."""

    # non-causal SCMs: features from a readout head, or the causes themselves (then k = d)
    noncausal_features: tuple[Literal["head", "causes"], ...] = ("head",)
    # causal SCMs: label node in the first or the last hidden block
    label_block: tuple[Literal["first", "last"], ...] = ("first", "last")
    # causal SCMs: features = contiguous clique around the label node, or a random subset
    feature_selection: tuple[Literal["clique", "random"], ...] = ("clique", "random")
    # causal SCMs: feature columns in node order, or in the order they were drawn
    feature_order: tuple[Literal["sorted", "unsorted"], ...] = ("sorted", "unsorted")

    def validate(self) -> None:
        for name in ("noncausal_features", "label_block", "feature_selection", "feature_order"):
            _choices(getattr(self, name), name)


@dataclass(frozen=True)
class AnnealedRange:
    """A range [lo, hi] that moves linearly from ``start`` (stage 1) to ``end`` (stage K)."""

    start: tuple[float, float]
    end: tuple[float, float]

    def validate(self) -> None:
        for name in ("start", "end"):
            lo, hi = getattr(self, name)
            require(lo <= hi, name, f"lower bound {lo} is above upper bound {hi}")

    def at(self, stage: int, stages: int) -> tuple[float, float]:
        """The range at phase-1 stage ``stage`` of ``stages`` (the tail uses ``stage = K``)."""
        frac = 1.0 if stages == 1 else (stage - 1) / (stages - 1)
        lo = (1.0 - frac) * self.start[0] + frac * self.end[0]
        hi = (1.0 - frac) * self.start[1] + frac * self.end[1]
        return lo, max(lo, hi)


@dataclass(frozen=True)
class CategoricalConfig:
    """Categorical features (``prior.dataset.categorical``, beyond the paper; TabPFN's prior
    has them): each task discretises a share of its feature columns into a few levels,
    stored as the codes 0..m-1 (prior_gen.mechanisms.categorical, docs/architecture.md §6)."""

    share: tuple[float, float] = (0.0, 0.5)  # per task: P(a column is categorical) ~ U(share)
    levels: tuple[int, int] = (2, 10)  # per categorical column: levels ~ U{lo..hi}
    # per categorical column: P(its codes are shuffled, i.e. not in the order of the latent)
    shuffle_levels: float = 1.0

    def validate(self) -> None:
        lo, hi = self.share
        require(0.0 <= lo <= hi <= 1.0, "share", f"needs 0 <= lo <= hi <= 1, got [{lo}, {hi}]")
        _int_range(self.levels, "levels", 2)
        _fraction(self.shuffle_levels, "shuffle_levels")


@dataclass(frozen=True)
class RealTablesConfig:
    """``prior.real_tables`` (beyond the paper; prior_gen.mechanisms.real_tables): with
    probability ``probability`` a task is cut from an entry of the corpus at ``corpus``
    (``scripts/build_real_corpus.py``), whose SHA-256 must be ``sha256``: the digest, not the
    path, is what the config's hash covers the corpus by."""

    corpus: str = "data/real_corpus.npz"
    sha256: str = ""
    probability: float = 0.5
    # True: a replaced task is cut from the corpus and its SCM does not run (faster; its
    # metadata holds the plan's factors alone). False: its SCM runs, as in older shards.
    skip_scm: bool = False

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"skip_scm": False}  # added after shards existed

    def validate(self) -> None:
        _fraction(self.probability, "probability")
        require(isinstance(self.skip_scm, bool), "skip_scm", "must be true or false")
        require(bool(self.corpus), "corpus", "must name the corpus file")
        require(len(self.sha256) == 64 and all(c in "0123456789abcdef" for c in self.sha256),
                "sha256", "must be the corpus file's SHA-256 (64 lower-case hex digits), as "
                "scripts/build_real_corpus.py prints it")


@dataclass(frozen=True)
class DatasetConfig:
    """Sizes of one PU task (§5): features d and labeled positives P, inclusive ranges.

    ``n_labeled`` is either one range for the whole run, or a size curriculum
    ``{start: [lo, hi], end: [lo, hi]}`` interpolated by stage like ``curriculum.eta`` and
    rounded to integers (:meth:`n_labeled_at`). ``categorical``: absent (None, the legacy
    value) = every feature continuous, as in the paper.
    """

    n_features: tuple[int, int] = (5, 20)
    n_labeled: tuple[int, int] | AnnealedRange = (100, 300)
    categorical: CategoricalConfig | None = None

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"categorical": None}  # added after shards existed
    REMOVED_KEYS: ClassVar[dict[str, Any]] = {"columns": None, "wide": None}
    REMOVED_WHY: ClassVar[str] = REMOVED_WHY

    def validate(self) -> None:
        _int_range(self.n_features, "n_features", 1)
        if isinstance(self.n_labeled, AnnealedRange):
            for bound in (*self.n_labeled.start, *self.n_labeled.end):
                require(1 <= bound <= MAX_LABELED, "n_labeled",
                        f"bounds must lie in 1..{MAX_LABELED:,}, got {bound:,}")
        else:
            _int_range(self.n_labeled, "n_labeled", 1, MAX_LABELED)

    def n_labeled_at(self, stage: int, stages: int) -> tuple[int, int]:
        """The inclusive range of P at phase-1 stage ``stage`` of ``stages`` (tail: K)."""
        if not isinstance(self.n_labeled, AnnealedRange):
            return self.n_labeled
        lo, hi = self.n_labeled.at(stage, stages)
        # round half up (not Python's half-to-even): the same integers on every machine
        lo_int, hi_int = math.floor(lo + 0.5), math.floor(hi + 0.5)
        return lo_int, max(lo_int, hi_int)


@dataclass(frozen=True)
class ScopeConfig:
    """At which scope each factor is drawn: once per stage, per step (global batch) or task.

    Defaults are the paper's §5 (docs/architecture.md §6). ``activations`` covers the schedule
    and the functions.
    """

    depth: Scope = "stage"
    width: Scope = "stage"
    n_features: Scope = "step"
    n_labeled: Scope = "step"
    noise_std: Scope = "step"
    cause_dist: Scope = "step"
    activations: Scope = "step"
    noncausal_features: Scope = "step"
    label_block: Scope = "step"
    feature_selection: Scope = "step"
    feature_order: Scope = "step"
    causal: Scope = "task"
    eta: Scope = "task"
    pi: Scope = "task"


@dataclass(frozen=True)
class PriorConfig:
    """The ``prior`` section: everything about one task except the curriculum's annealing of
    η, π and P(causal) (``dataset.n_labeled`` may carry its own, a size curriculum)."""

    scm: SCMConfig = field(default_factory=SCMConfig)
    modes: ModeConfig = field(default_factory=ModeConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    scopes: ScopeConfig = field(default_factory=ScopeConfig)
    # some tasks cut from a corpus of real tables (prior_gen.mechanisms.real_tables)
    real_tables: RealTablesConfig | None = None

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"real_tables": None}  # added after shards existed
    REMOVED_KEYS: ClassVar[dict[str, Any]] = {"label_rule": None, "labeling": None,
                                              "label_noise": None}
    REMOVED_WHY: ClassVar[str] = REMOVED_WHY

    def validate(self) -> None:
        # a causal SCM must have d + 1 distinct nodes in its hidden blocks (label + features)
        blocks = self.scm.depth[0] - 1
        nodes = blocks * self.scm.width[0]
        need = self.dataset.n_features[1] + 1
        require(
            nodes >= need,
            "scm.depth",
            f"the smallest SCM ({self.scm.depth[0]} layers × width {self.scm.width[0]} = "
            f"{nodes} hidden nodes) cannot hold the label and {need - 1} features; raise "
            "scm.depth / scm.width or lower dataset.n_features",
        )


@dataclass(frozen=True)
class CurriculumConfig:
    """Phase 1: ``stages`` × ``steps_per_stage`` steps; phase 2: ``tail_steps`` (§5)."""

    stages: int = 100  # K
    steps_per_stage: int = 750  # S
    tail_steps: int = 25_000  # T
    global_batch: int = 48  # tasks per step
    eta: AnnealedRange = AnnealedRange(start=(1.0, 1.0), end=(0.5, 2.0))  # frozen: shareable
    pi: AnnealedRange = AnnealedRange(start=(0.5, 0.5), end=(0.1, 0.9))
    # P(causal) at stage s = causal_final * s / K  (paper: s / (2K), i.e. causal_final = 0.5)
    causal_final: float = 0.5

    def validate(self) -> None:
        for key, minimum in (("stages", 1), ("steps_per_stage", 1), ("tail_steps", 0),
                             ("global_batch", 1)):
            _at_least(getattr(self, key), key, minimum)
        for bound in (*self.eta.start, *self.eta.end):
            require(0 < bound <= MAX_ETA, "eta", f"bounds must lie in (0, {MAX_ETA:g}], got "
                    f"{bound:g}")
        for bound in (*self.pi.start, *self.pi.end):
            require(0 < bound < 1, "pi", f"bounds must lie in (0, 1), got {bound}")
        _fraction(self.causal_final, "causal_final")

    @property
    def phase1_steps(self) -> int:
        return self.stages * self.steps_per_stage

    @property
    def total_steps(self) -> int:
        return self.phase1_steps + self.tail_steps


@dataclass(frozen=True)
class ShardConfig:
    """How tasks are stored. Not part of the config hash: it never changes task bytes."""

    format: Literal["zarr", "webdataset"] = "zarr"
    steps_per_shard: int = 25  # a shard = this many consecutive steps of one stage
    # Blosc inner compressor, level and shuffle (chosen by speed/bench_prior_gen.py)
    compressor: Literal["zstd", "lz4", "lz4hc", "blosclz", "zlib"] = "lz4hc"
    level: int = 1
    shuffle: Literal["byte", "bit", "none"] = "byte"

    def validate(self) -> None:
        _at_least(self.steps_per_shard, "steps_per_shard", 1)
        require(0 <= self.level <= 9, "level", f"must lie in 0..9, got {self.level}")


@dataclass(frozen=True)
class GenerationConfig:
    """Everything ``prior-gen`` needs. ``hash()`` covers only what determines task bytes."""

    seed: int = 0
    prior: PriorConfig = field(default_factory=PriorConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    shards: ShardConfig = field(default_factory=ShardConfig)

    def validate(self) -> None:
        require(0 <= self.seed < 2**63, "seed", f"must lie in 0..2**63-1, got {self.seed}")

    def identity(self) -> dict[str, Any]:
        """The part of the config that determines task bytes (seed, prior, curriculum), less
        the keys at their legacy value (the sections' ``LEGACY_VALUES``), so that every
        config that keeps the old behaviour keeps its hash, its shards and checkpoints."""
        return {"seed": self.seed, "prior": identity_dict(self.prior),
                "curriculum": identity_dict(self.curriculum)}

    def hash(self) -> str:
        return config_hash(self.identity())

    def with_seed(self, seed: int) -> GenerationConfig:
        new = dataclasses.replace(self, seed=seed)
        new.validate()
        return new


def generation_config_from_mapping(data: Any, source: str = "config") -> GenerationConfig:
    """Build a :class:`GenerationConfig` from a parsed YAML mapping (other sections ignored)."""
    if not isinstance(data, dict):
        raise ConfigError("", f"{source} must hold a mapping of sections")
    for key in data:
        if key not in KNOWN_SECTIONS:
            raise ConfigError(
                str(key), f"unknown top-level section (allowed: {', '.join(KNOWN_SECTIONS)})"
            )
    ours = {k: data[k] for k in ("seed", "prior", "curriculum", "shards") if k in data}
    return from_mapping(GenerationConfig, ours)


def load_generation_config(path: str | Path) -> GenerationConfig:
    """Read and validate the prior generator's sections of the YAML run config at ``path``."""
    return generation_config_from_mapping(load_yaml(path), str(path))
