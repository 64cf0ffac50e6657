"""How the generator computes the tasks of :mod:`prior_gen.paper.reference` fast, and the same
on every CPU.

``forward`` (the SCM passes: ``native``, a step's tasks batched in numpy and BLAS; ``portable``,
one compiled pass per task), ``pu`` (standardization, labels and the PU split of a task),
``portable`` (the compiled kernels whose bytes do not depend on the CPU), ``activations`` (the
ten φ as numpy kernels), ``gaussian`` and ``noise_table`` (the two ways normals are drawn).
``tests/prior_gen/test_reference.py`` checks every path against the reference, task by task.
"""
