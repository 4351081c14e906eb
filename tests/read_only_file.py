"""Make a file read-only for this process for the length of a ``with`` block (fault tests of SQLite files)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Generator
from pathlib import Path

import pytest

__all__ = ["read_only"]


@contextlib.contextmanager
def read_only(path: Path) -> Generator[None]:
    """Make ``path`` read-only even for root, restoring it afterwards.

    Not root: mode 0444, then 0644. Root ignores modes: the file is made immutable
    (``chattr +i``, then ``-i``); the test is skipped where ``chattr +i`` is refused.
    """
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
        pytest.skip("running as root without chattr +i: cannot make a file read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=True)
