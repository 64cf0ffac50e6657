"""The paper's path: what a task is (paper §2, the prior; §5, the curriculum).

Read in this order: ``reference`` (§2 for one task, written plainly: the SCM, its noise, the
feature and label selection, the labels and the PU split), ``factors`` (a task's plan: the
curriculum's draws of its depth, width, sizes, π, η, functions and mode), ``curriculum`` (the
stages and their annealed ranges), ``seeding`` (every draw keyed by what is drawn). How the
generator computes the same tasks fast is in :mod:`prior_gen.engine`.
"""
