"""``make serve PORT=… HOST=…`` passes them to ``hivegate serve`` (issue 7 item 17); checked with ``make -n``."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.gateway_process import ROOT

TIMEOUT_SECONDS = 30


def _serve_command(*args: str, env: dict[str, str] | None = None) -> str:
    """The ``hivegate serve`` line ``make -n serve ARGS`` would run (nothing is run)."""
    base = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "MAKEFLAGS")}
    result = subprocess.run(
        ["make", "-n", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env={**base, **(env or {})},
        check=True,
    )
    return next(line for line in result.stdout.splitlines() if "hivegate serve" in line)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_serve_takes_port_and_host() -> None:
    """Issue 7 item 17: PORT and HOST reach ``serve``; a HOST from the environment (zsh's) does not."""
    assert "--port 9123" in _serve_command("PORT=9123")
    line = _serve_command("PORT=9123", "HOST=0.0.0.0")
    assert "--host 0.0.0.0" in line
    assert "--port 9123" in line
    plain = _serve_command()
    assert "--host" not in plain
    assert "--port" not in plain
    assert "--host" not in _serve_command(env={"HOST": "my-laptop.local"})
    assert "--port 7000" in _serve_command(env={"PORT": "7000"})
