"""A bound on how long a block of a storage fault test may take."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator

__all__ = ["bounded"]


@contextlib.contextmanager
def bounded(seconds: float) -> Generator[None]:
    """Fail the test if the block took ``seconds`` or longer (wall clock, ``time.monotonic``)."""
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < seconds, f"took {elapsed:.1f} s, limit {seconds:.1f} s"
