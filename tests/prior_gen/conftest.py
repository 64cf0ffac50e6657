"""Make tests/prior_gen/prior_gen_testlib.py importable under --import-mode=importlib."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
