"""Model hyper-parameters (paper §3), stored as JSON next to the weights."""

from __future__ import annotations

from dataclasses import dataclass

from puicl_common.configio import require


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
