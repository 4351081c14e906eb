"""`hivegate agents apply` while a server runs: the running agent changes, and clients are told.

Spec: MCP 2026-07-28 basic/utilities/subscriptions (``notifications/tools/list_changed`` on a
``subscriptions/listen`` stream); MCP 2025-11-25 server/tools#list-changed-notification (on the
GET stream of a handshake-era session).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.server.subscriptions import ToolsListChanged
from mcp_types import ToolListChangedNotification

from tests.gateway_process import ROOT, run_gateway

AGENT = """
[[agents]]
id = "echo"
name = "Echo"
owner = "alice"
auth = "none"
backend = {{ type = "python", callable = "echo_agent:reply" }}
{extra}
"""
NEW_SKILL = """
[[agents.skills]]
id = "loud"
name = "Loud"
expose_as_tool = true
"""


def _write(path: Path, extra: str = "") -> Path:
    path.write_text(AGENT.format(extra=extra), encoding="utf-8")
    return path


async def _apply(file: Path, database_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])}
    result = await anyio.run_process(
        [sys.executable, "-m", "hivegate", "agents", "apply", str(file), "--database-url", database_url],
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()


async def test_listen_stream_announces_applied_change(tmp_path: Path, registry_url: str) -> None:
    database_url = registry_url
    config = _write(tmp_path / "agents.toml")
    env = {"PYTHONPATH": str(ROOT / "examples"), "HIVEGATE_DATABASE__POLL_INTERVAL_SECONDS": "0.1"}
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        async with Client(f"{gateway.url}/echo/mcp", mode="2026-07-28", cache=None) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
            with anyio.fail_after(20):
                async with client.listen(tools_list_changed=True) as subscription:
                    await _apply(_write(tmp_path / "changed.toml", NEW_SKILL), database_url)
                    event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "loud"]


async def test_legacy_session_gets_list_changed_on_get_stream(tmp_path: Path, registry_url: str) -> None:
    database_url = registry_url
    config = _write(tmp_path / "agents.toml")
    env = {"PYTHONPATH": str(ROOT / "examples"), "HIVEGATE_DATABASE__POLL_INTERVAL_SECONDS": "0.1"}
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    with run_gateway(config, database_url=database_url, env=env) as gateway:
        async with Client(f"{gateway.url}/echo/mcp", mode="legacy", message_handler=on_message) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
            await _apply(_write(tmp_path / "changed.toml", NEW_SKILL), database_url)
            with anyio.fail_after(20):
                await changed.wait()
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "loud"]
