"""The error every configuration check raises, and how a value is shown in one.

Apart from :mod:`puicl_common.configio`, so that :mod:`puicl_common.versioning`, which that
module applies, imports no module that imports it back.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["ConfigError", "describe"]


class ConfigError(ValueError):
    """A configuration value is unknown, missing, mistyped or out of range.

    ``key`` is the dotted path of the offending entry (may be empty for whole-file errors).
    """

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)

    def under(self, prefix: str) -> ConfigError:
        """The same error with ``prefix`` prepended to its key path."""
        if not prefix:
            return self
        key = f"{prefix}.{self.key}" if self.key else prefix
        return ConfigError(key, self.message)


# how much of a value an error message shows: a few levels and items of it, never the whole
# (a YAML alias bomb is small as written and astronomically large as text)
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist, _SHOWN.maxtuple = 3, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother = 60, 60


def describe(value: Any) -> str:
    """``value`` for an error message: at most 60 characters, whatever its size."""
    text = _SHOWN.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
