"""Studies: the scripts that measured what the classifier and the recipe keep or drop.

Each runs as a module from the repository's root (``python -m studies.<name> --help``); the
figures they produced and the decisions taken on them are in ``docs/recipe.md``,
``docs/benchmark.md``, ``docs/dev_suite.md``, ``docs/classifier_measurements.md`` and
``docs/decisions.md``. They are repository tools, not part of the
installed packages.
"""
