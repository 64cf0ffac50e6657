"""The catalogue of ensemble members: what each shows the model, in a fixed order.

The model has no positional encoding, so shuffling rows or features changes nothing it
computes; members must differ in *what the model sees*. A member (the word is
:mod:`puicl_model.planning`'s, where the passes are planned) is an encoding of the table
(:mod:`puicl_model.preprocessing`) plus optional random shares of the labeled rows and of the
features. ``n_estimators=k`` takes the first ``k`` members of :data:`MEMBERS`; beyond its
length the list repeats with fresh random draws.

Member 0 is the classifier as configured (its ``numeric`` and ``categorical`` settings, every
labeled row, every feature), so ``n_estimators=1`` is the single-pass classifier. The default,
``n_estimators=None``, depends on the table: one member for numeric-only tables, two (base and
power-ordinal) when the table has categorical columns (:func:`default_n_estimators`).
"""

from __future__ import annotations

from dataclasses import dataclass

from puicl_model.preprocessing import CategoricalStrategy, NumericStrategy

__all__ = [
    "DEFAULT_N_ESTIMATORS",
    "DEFAULT_N_ESTIMATORS_CATEGORICAL",
    "MEMBERS",
    "Member",
    "default_n_estimators",
    "members_for",
]


@dataclass(frozen=True)
class Member:
    """What one ensemble member shows the model."""

    name: str
    numeric: NumericStrategy | None = None  # None: the classifier's own ``numeric``
    categorical: CategoricalStrategy | None = None  # None: the classifier's ``categorical``
    # each pass holds a random share of the labeled rows (at least 2); 1.0: all of them
    labeled_share: float = 1.0
    # the member sees a random share of the features, where the table has at least
    # ``planning.MIN_FEATURES_FOR_SUBSET`` of them; 1.0: all
    feature_share: float = 1.0

    def __post_init__(self) -> None:
        for name in ("labeled_share", "feature_share"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"Member {self.name!r}: {name} must be in (0, 1], got {value}")


# The members, in the order n_estimators takes them. Member 0 must stay the classifier as
# configured (n_estimators=1 is the single pass). The others are ordered by the mean AUC gain
# each gave paired with member 0 on 12 benchmark tasks with the bundled checkpoint
# (docs/performance.md, "Ensemble members"); studies/ensemble_members.py re-measures it.
MEMBERS: tuple[Member, ...] = (
    Member("base"),
    Member("power-ordinal", numeric="power", categorical="ordinal"),
    Member("standard-frequency", numeric="standard", categorical="frequency"),
    Member("feature-subset", feature_share=0.7, labeled_share=0.7),
    Member("half-labeled", labeled_share=0.5),
)

# n_estimators=None: how many members, chosen by the table (wide tables and large pools still
# get every feature group and every chunk within each member). Measured with puicl-v1 on the
# dev subset (docs/performance.md, "Ensemble members"): the second member (power-ordinal) gains
# +0.023 AUC on tables with categorical columns and +0.005 on numeric-only ones, and a second
# member costs about one more single pass. So numeric tables keep the single pass (the
# (200, 800, 20) call stays 1.0x) and tables with categorical columns get two members.
DEFAULT_N_ESTIMATORS = 1
DEFAULT_N_ESTIMATORS_CATEGORICAL = 2


def default_n_estimators(has_categorical: bool) -> int:
    """The member count ``n_estimators=None`` stands for: more members where they pay."""
    return DEFAULT_N_ESTIMATORS_CATEGORICAL if has_categorical else DEFAULT_N_ESTIMATORS


def members_for(n_estimators: int | None, catalogue: tuple[Member, ...] = MEMBERS, *,
                has_categorical: bool = False) -> list[Member]:
    """The members of an ensemble of ``n_estimators`` (None: :func:`default_n_estimators` of
    a table with or without categorical columns); entry ``m`` is
    ``catalogue[m % len(catalogue)]``."""
    count = (default_n_estimators(has_categorical) if n_estimators is None
             else int(n_estimators))
    if not catalogue or catalogue[0] != Member(catalogue[0].name):
        raise ValueError("an ensemble catalogue must start with the classifier as configured: "
                         "a Member with no other setting than its name")
    return [catalogue[index % len(catalogue)] for index in range(count)]
