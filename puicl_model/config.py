"""Model hyper-parameters (paper §3), stored as JSON next to the weights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from puicl_common.configio import require, to_dict
from puicl_common.versioning import drop_legacy_values

# Options that were studied and removed: none beat the base recipe (docs/recipe.md). Configs
# and checkpoints written while they existed name them at these values, so these values stay
# accepted (and, as then, out of the stored config and the training hash); any other value is
# refused, naming the key (the versioning rule, puicl_common.versioning, which
# puicl_common.configio.from_mapping applies to REMOVED_KEYS).
REMOVED_OPTIONS: dict[str, Any] = {"norm": "post_layernorm", "thinking_rows": 0,
                                   "feature_group": 1}

# Options added after weights were published, with the value that reproduces those weights.
# ``to_mapping`` leaves such a key out while it holds that value (puicl_common.versioning), so
# the configs, training hashes and weight headers written before the option existed stay the
# same bytes.
LEGACY_VALUES: dict[str, Any] = {"value_encoder": "linear", "value_bins": 16}
VALUE_ENCODERS = ("linear", "rbf")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the PUICL transformer. The defaults are the paper's (docs/architecture.md §7)."""

    REMOVED_KEYS: ClassVar[Mapping[str, Any]] = REMOVED_OPTIONS
    REMOVED_WHY: ClassVar[str] = "the option did not beat the base recipe (docs/recipe.md)"

    embed_dim: int = 128  # e: size of every cell embedding
    num_layers: int = 6  # L: dual-axis transformer blocks
    num_heads: int = 8  # heads in both attentions of a block
    ff_dim: int = 256  # e_ff: feed-forward hidden size; also the decoder's hidden size
    feature_clip: float = 100.0  # standardized features are clipped to ±feature_clip
    # features per task seen in training; the classifier ensembles over subsets above this
    max_features: int = 20
    # how a cell's standardized value becomes a vector (PUICLModel.embed_features):
    # linear: the paper's Linear(1, e); rbf: that plus a learned mix of value_bins radial-basis
    # functions of the value
    value_encoder: str = "linear"
    value_bins: int = 16

    def validate(self) -> None:
        require(self.embed_dim > 0, "embed_dim", f"must be positive, got {self.embed_dim}")
        require(self.num_layers > 0, "num_layers", f"must be positive, got {self.num_layers}")
        require(self.num_heads > 0, "num_heads", f"must be positive, got {self.num_heads}")
        require(
            self.embed_dim % self.num_heads == 0,
            "num_heads",
            f"must divide embed_dim ({self.embed_dim}), got {self.num_heads}",
        )
        require(self.ff_dim > 0, "ff_dim", f"must be positive, got {self.ff_dim}")
        require(self.feature_clip > 0, "feature_clip", f"must be positive, got {self.feature_clip}")
        require(self.max_features > 0, "max_features", f"must be positive, got {self.max_features}")
        require(self.value_encoder in VALUE_ENCODERS, "value_encoder",
                f"must be one of {', '.join(VALUE_ENCODERS)}, got {self.value_encoder!r}")
        require(self.value_bins >= 2, "value_bins", f"must be at least 2, got {self.value_bins}")

    def to_mapping(self) -> dict[str, Any]:
        """The config as stored (weights, hashes): options at their legacy value left out."""
        return drop_legacy_values(to_dict(self), LEGACY_VALUES)
