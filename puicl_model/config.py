"""Model hyper-parameters (paper §3, and the recipe options of docs/training.md), stored as JSON
next to the weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from puicl_common.configio import require, to_dict

# Options added after the first checkpoints, with the value that means "as before". A key at
# this value is left out of the stored config and of a run's training hash, so configs and
# weight files written before the key existed keep their bytes and hashes.
LEGACY_DEFAULTS: dict[str, Any] = {"norm": "post_layernorm", "thinking_rows": 0,
                                   "feature_group": 1}


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the PUICL transformer. The defaults are the paper's (1,226,882 parameters)."""

    embed_dim: int = 128  # e: size of every cell embedding
    num_layers: int = 6  # L: dual-axis transformer blocks
    num_heads: int = 8  # heads in both attentions of a block
    ff_dim: int = 256  # e_ff: feed-forward hidden size; also the decoder's hidden size
    feature_clip: float = 100.0  # standardized features are clipped to ±feature_clip
    # features per task seen in training; the classifier ensembles over subsets above this
    max_features: int = 20
    # "post_layernorm": the paper's h = LN(h + f(h)); "pre_rmsnorm": h = h + f(RMSNorm(h)),
    # with a final RMSNorm before the decoder (the modded-nanoTabPFN speedrun's record 6)
    norm: Literal["post_layernorm", "pre_rmsnorm"] = "post_layernorm"
    # learnable rows appended to every table: they attend and are attended to across rows and
    # across features, and are never decoded (the speedrun's "thinking rows")
    thinking_rows: int = 0
    # features per column token: each token embeds g consecutive standardized features (the
    # last group zero-padded) with Linear(g, e), as TabICLv2 does; 1 is the paper's one cell per
    # feature. Fewer tokens per row, at the cost of invariance to the order of features.
    feature_group: int = 1

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
        require(self.thinking_rows >= 0, "thinking_rows",
                f"must be 0 or more, got {self.thinking_rows}")
        require(self.feature_group >= 1, "feature_group",
                f"must be 1 or more, got {self.feature_group}")

    def column_tokens(self, features: int) -> int:
        """Feature tokens of a row with ``features`` features (the label token not counted)."""
        return -(-features // self.feature_group)

    def to_mapping(self) -> dict[str, Any]:
        """The config as stored (weights, hashes): options at their legacy value left out."""
        return {key: value for key, value in to_dict(self).items()
                if key not in LEGACY_DEFAULTS or value != LEGACY_DEFAULTS[key]}
