"""``python -m relay``: see :mod:`relay.cli`."""

import sys

from relay.cli import main

sys.exit(main())
