"""Model hyper-parameters (paper §3), stored as JSON next to the weights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from puicl_common.configio import require, to_dict

# Options that were studied and removed: none beat the base recipe (docs/recipe.md). Configs
# and checkpoints written while they existed name them at these values, so these values stay
# accepted (and, as then, out of the stored config and the training hash); any other value is
# refused, naming the key (the versioning rule, puicl_common.versioning, which
# puicl_common.configio.from_mapping applies to REMOVED_KEYS).
# (``value_encoder`` and ``value_bins``: the radial-basis value encoder of the prior study,
# which lost to the paper's linear cell encoder.)
REMOVED_OPTIONS: dict[str, Any] = {"norm": "post_layernorm", "thinking_rows": 0,
                                   "feature_group": 1, "value_encoder": "linear",
                                   "value_bins": 16}


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

    def to_mapping(self) -> dict[str, Any]:
        """The config as stored (weights, hashes)."""
        return to_dict(self)
