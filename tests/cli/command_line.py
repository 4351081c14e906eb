"""Run ``python -m hivegate ARGS --database-url URL`` as the CLI tests do, and check its exit status.

Wide (``COLUMNS=250``) and plain (``NO_COLOR=1``) output, so tables do not wrap and carry no
escape codes; each run bounded by ``TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["TIMEOUT_SECONDS", "run_cli"]

TIMEOUT_SECONDS = 60


def run_cli(
    database_url: str, *args: str, stdin: str | None = None, expect: int = 0, pythonpath: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command; fail the test unless it exits with ``expect``; the finished process (text output).

    ``stdin``: the command's input (None: this process's stdin). ``pythonpath``: the child's
    ``PYTHONPATH`` in place of this process's.
    """
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", *args, "--database-url", database_url],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env=env,
        check=False,
    )
    assert result.returncode == expect, result.stdout + result.stderr
    return result
