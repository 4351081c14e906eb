"""An HTTP ``mcp`` backend's timeouts, as docs/backends.md gives them: ``timeout_seconds`` bounds connecting
and each list, read, prompt or completion; a ``tools/call`` is bounded by the agent's
``invoke_timeout_seconds`` only, so a tool may work longer than ``timeout_seconds`` before it answers.

Found while building the lean hop: the SDK client's HTTP client read with a ``timeout_seconds`` read
timeout, so a tool that answered (one JSON body) after more than ``timeout_seconds`` failed as
``agent_service_unavailable`` on the handshake-era path. Both paths are tried: a 2026-07-28 caller's
plain call (the lean hop) and a handshake-era caller's (the SDK client).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.e2e.test_mcp_stdio_backend import MODERN, TIMEOUT, World, client_of, text
from tests.gateway_process import run_gateway
from tests.upstreams.running import run_mcp_http_upstream


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder: Path = tmp_path_factory.mktemp("mcp-http-timeouts")
    with run_mcp_http_upstream() as url:
        database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
        config = folder / "agents.toml"
        config.write_text(
            f"""
[[agents]]
id = "local"
name = "An HTTP MCP server, 1 s timeout_seconds, 5 s invoke timeout"
owner = "alice"
invoke_timeout_seconds = 5
backend = {{ type = "mcp", url = "{url}/mcp", timeout_seconds = 1 }}
""",
            encoding="utf-8",
        )
        alice = create_user_with_key(database_url, "alice")
        run_cli(database_url, "agents", "apply", str(config))
        with run_gateway(None, database_url=database_url) as gateway:
            yield World(gateway, alice)


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_a_tool_may_work_longer_than_timeout_seconds(world: World, mode: str) -> None:
    async with client_of(world, mode) as client:
        with anyio.fail_after(TIMEOUT):
            assert text(await client.call_tool("slow", {"seconds": 2.5})) == "after 2.5 s"


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_a_tool_past_the_invoke_timeout_is_service_timeout(world: World, mode: str) -> None:
    async with client_of(world, mode) as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as raised:
            await client.call_tool("slow", {"seconds": 30})
    assert raised.value.error.data == {"code": "service_timeout", "timeout_seconds": 5.0}
