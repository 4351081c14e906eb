"""``{name}`` placeholder filling for prompt messages and resource-template patterns.

One pass over the pattern: a value that itself contains ``{other}`` is inserted literally,
never expanded again, and the result does not depend on the order of the values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["fill_placeholders"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


def fill_placeholders(pattern: str, values: Mapping[str, str]) -> str:
    """Replace each ``{name}`` in ``pattern`` whose name is in ``values``; leave unknown ones as they are."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), pattern)
