"""Speed and memory measurements: the figures of ``docs/performance.md``.

Each script runs as a module from the repository's root (``python -m speed.<name> --help``);
speed is measured here, never asserted in tests. These are repository tools, not part of the
installed packages.
"""
