"""The run's optimizer: AdamW (paper §5), or Muon for the blocks' weight matrices + AdamW.

``training.optimizer.name: muon`` splits the parameters in two:

* **Muon** (``torch.optim.Muon``): the 2-D weights of the transformer blocks -- the fused
  q/k/v projection, the attention output projections and the feed-forward linears. Muon
  orthogonalizes a matrix's update, which is meaningful only for a hidden linear map.
* **AdamW**: everything else -- the feature and target encoders (``Linear(1, e)``: an
  embedding of a scalar, whose "matrix" is one column), the unlabeled token, the norms'
  gains, all biases and the decoder (the output head).

That is the split of Muon's own guidance (Keller Jordan, "Muon: an optimizer for hidden layers
in neural networks", github.com/KellerJordan/Muon: embeddings, heads, gains and biases with
AdamW) and of the modded-nanoTabPFN speedrun (record 2). A parameter the model adds later
outside ``blocks`` (learnable rows, say) stays with AdamW, which suits embedding-like tables.
The fused q/k/v weight is orthogonalized as one ``3e x e`` matrix: ``torch.optim.Muon`` takes
2-D parameters only, and splitting it would mean changing the model's layout.

Under DDP every rank holds the same all-reduced gradients before the step and Muon's
Newton-Schulz iteration is a fixed sequence of matrix products per parameter, so every rank
computes the same update: nothing here communicates.

The learning rate is set each step by :func:`set_learning_rate`: AdamW's groups get the
schedule's rate, Muon's the same rate times ``muon_lr / peak`` (their ``lr_scale``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainer.config import TrainingConfig
from trainer.schedule import peak_learning_rate


def muon_parameter_names(model: nn.Module) -> list[str]:
    """Names of the parameters Muon trains: the 2-D weights inside ``model.blocks``."""
    return [
        name
        for name, param in model.named_parameters()
        if name.startswith("blocks.") and param.ndim == 2
    ]


class MuonWithAdamW:
    """Muon for the blocks' matrices and AdamW for the rest, stepped as one optimizer.

    Offers what the training loop uses of a ``torch.optim.Optimizer``: ``param_groups``,
    ``zero_grad``, ``step``, ``state_dict`` and ``load_state_dict``. The state holds both
    optimizers' states under ``"muon"`` and ``"adamw"``.
    """

    def __init__(self, model: nn.Module, training: TrainingConfig) -> None:
        opt = training.optimizer
        muon_names = set(muon_parameter_names(model))
        matrices = [p for n, p in model.named_parameters() if n in muon_names]
        others = [p for n, p in model.named_parameters() if n not in muon_names]
        peak = peak_learning_rate(training)
        self.muon = torch.optim.Muon(
            [{"params": matrices, "lr_scale": opt.muon_lr / peak}],
            lr=opt.muon_lr,  # replaced by the schedule every step
            weight_decay=opt.muon_weight_decay,
            momentum=opt.muon_momentum,
            nesterov=opt.muon_nesterov,
            ns_steps=opt.muon_ns_steps,
            adjust_lr_fn=opt.muon_adjust_lr,
        )
        self.adamw = torch.optim.AdamW(
            others,
            lr=peak,
            betas=(opt.beta1, opt.beta2),
            eps=opt.eps,
            weight_decay=opt.weight_decay,
        )

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [*self.muon.param_groups, *self.adamw.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self.muon.step()
        self.adamw.step()

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != {"muon", "adamw"}:
            raise ValueError(
                "the checkpoint's optimizer state is not a Muon + AdamW state (keys "
                f"{sorted(state)}): was the run trained with another training.optimizer.name?"
            )
        self.muon.load_state_dict(state["muon"])
        self.adamw.load_state_dict(state["adamw"])


def build_optimizer(model: nn.Module, training: TrainingConfig) -> Any:
    """The optimizer ``training.optimizer`` names, over ``model``'s parameters."""
    opt = training.optimizer
    if opt.name == "muon":
        return MuonWithAdamW(model, training)
    return torch.optim.AdamW(
        model.parameters(),
        lr=training.phase1.peak_lr,  # replaced by the schedule every step
        betas=(opt.beta1, opt.beta2),
        eps=opt.eps,
        weight_decay=opt.weight_decay,
    )


def set_learning_rate(optimizer: Any, lr: float) -> None:
    """Give every group the scheduled rate, times its ``lr_scale`` where it has one (Muon)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group["lr_scale"] if "lr_scale" in group else lr
