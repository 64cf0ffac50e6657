"""Function families of the SCM's hidden nodes (``prior.scm.families``) and their registry.

A family is one module implementing :class:`prior_gen.families.base.NodeFamily`; adding one is
that module plus one line below. The name is the config key (``prior.scm.families.weights``)
and orders the draws: in a block, families draw their nodes in the sorted order of their
names, so adding a family changes no existing config's data.

Without ``prior.scm.families`` none of this runs: the paper's MLP is computed by
:func:`prior_gen.scm.forward_group` / :func:`prior_gen.scm.forward_portable` as before.
"""

from __future__ import annotations

from prior_gen.families.base import Block, NodeFamily, Nodes
from prior_gen.families.linear import LinearFamily
from prior_gen.families.mlp import MLPFamily
from prior_gen.families.product import ProductFamily
from prior_gen.families.threshold import ThresholdFamily
from prior_gen.families.trees import TreeFamily

__all__ = ["FAMILIES", "Block", "NodeFamily", "Nodes"]

FAMILIES: dict[str, NodeFamily] = {
    "mlp": MLPFamily(),
    "tree": TreeFamily(),
    "threshold": ThresholdFamily(),
    "product": ProductFamily(),
    "linear": LinearFamily(),
}
