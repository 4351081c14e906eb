"""A server that has started an SDK-server backend (its lifespan) shuts down cleanly on SIGTERM.

Regression: the backend's lifespan used to be entered in the request task that first reached
the agent and left in the lifespan task, which anyio refuses ("exit cancel scope in a
different task") — "Application shutdown failed" with a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import anyio
from mcp import Client

from tests.gateway_process import ROOT, run_gateway


async def test_clean_shutdown_after_an_sdk_backend_served() -> None:
    with run_gateway(ROOT / "examples" / "hivegate.toml") as gateway:
        async with Client(f"{gateway.url}/notes/mcp", mode="legacy") as client:
            assert (await client.read_resource("note://7")).contents
        gateway.process.terminate()
        with anyio.fail_after(20):
            code = await anyio.to_thread.run_sync(gateway.process.wait)
        output = gateway.output()
    # uvicorn re-raises the signal it handled once shutdown is complete, so SIGTERM is the exit status.
    assert code in (0, -signal.SIGTERM), output
    assert "Traceback" not in output
    assert "shutdown failed" not in output.lower()


def test_busy_port_exits_3_without_traceback() -> None:
    with run_gateway(ROOT / "examples" / "hivegate.toml") as gateway:
        port = gateway.url.rsplit(":", 1)[1]
        result = subprocess.run(
            [sys.executable, "-m", "hivegate", "serve", "--port", port, "--dev", "--database-url", "memory://"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
    assert result.returncode == 3
    assert "address already in use" in result.stderr.lower()
    assert "Traceback" not in result.stderr + result.stdout


def test_serve_refuses_default_secrets_outside_dev() -> None:
    """Issue 3 item 7: the development secrets are refused unless ``--dev``; the message names each one."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HIVEGATE_SECURITY__")}
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", "serve", "--port", "0", "--database-url", "memory://"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "250"},
        check=False,
    )
    assert result.returncode == 2
    assert "security.cursor_key (env HIVEGATE_SECURITY__CURSOR_KEY)" in result.stderr
    assert "security.token_signing_key (env HIVEGATE_SECURITY__TOKEN_SIGNING_KEY)" in result.stderr
    assert "listening" not in result.stdout
    assert "Traceback" not in result.stderr


async def test_serve_starts_without_dev_when_the_secrets_are_set() -> None:
    env = {
        "HIVEGATE_SECURITY__CURSOR_KEY": "cursor-key-" + "c" * 32,
        "HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": "signing-key-" + "s" * 32,
    }
    with run_gateway(ROOT / "examples" / "hivegate.toml", env=env, dev=False) as gateway:
        async with Client(f"{gateway.url}/echo/mcp", mode="legacy") as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo", "shout"]
