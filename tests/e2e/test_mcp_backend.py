"""Issue 11 item 2 (its first part): an agent that fronts an upstream MCP server over Streamable HTTP.

The upstream is hivegate's conformance fixture (``examples/conformance_server.py``, an official-SDK
``MCPServer``) run as its own process on loopback; ``hivegate serve`` federates it as the agent
``fed``. The official MCP client, in both eras, sees through the gateway what it sees directly:
the same tools, resources, templates and prompts, the same results, progress on its own token, and
hivegate's own pagination over the upstream's items.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

TIMEOUT = 60
MODERN = "2026-07-28"
START_SECONDS = 30.0


@dataclass
class World:
    gateway: GatewayProcess
    upstream: str  # the fixture's MCP URL
    alice: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _answers(url: str) -> bool:
    async with httpx.AsyncClient(timeout=2) as http:
        try:
            await http.get(url)
        except httpx.TransportError:
            return False
        return True


def _wait_until_listening(url: str, process: subprocess.Popen[bytes]) -> None:
    """A bounded wait for the upstream to accept connections (it prints nothing when ready)."""

    async def wait() -> None:
        with anyio.fail_after(START_SECONDS):
            while not await _answers(url):
                assert process.poll() is None, "the upstream fixture exited during start-up"
                await anyio.sleep(0.05)

    anyio.run(wait)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("mcp-backend")
    port = _free_port()
    upstream = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, str(ROOT / "examples" / "conformance_server.py"), "--port", str(port)]
    process = subprocess.Popen(command, cwd=ROOT / "examples", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_listening(upstream, process)
        url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
        config = folder / "agents.toml"
        config.write_text(
            f"""
[[agents]]
id = "fed"
name = "Federated fixture"
owner = "alice"
page_size = 7
backend = {{ type = "mcp", url = "{upstream}" }}

[[agents]]
id = "fed-gone"
name = "Federated, nothing there"
owner = "alice"
backend = {{ type = "mcp", url = "http://127.0.0.1:{_free_port()}/mcp", timeout_seconds = 5 }}
""",
            encoding="utf-8",
        )
        alice = create_user_with_key(url, "alice")
        run_cli(url, "agents", "apply", str(config))
        with ExitStack() as stack:
            gateway = stack.enter_context(run_gateway(None, database_url=url))
            yield World(gateway, upstream, alice)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@asynccontextmanager
async def client_of(url: str, mode: str, key: str | None = None) -> AsyncGenerator[McpClient]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        yield client


async def _all_tools(client: McpClient) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await client.session.list_tools(params=None if cursor is None else PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_the_gateway_lists_what_the_upstream_lists_paged_by_its_own_cursors(world: World, mode: str) -> None:
    async with (
        client_of(world.upstream, mode) as direct,
        client_of(f"{world.gateway.url}/fed/mcp", mode, world.alice) as fed,
    ):
        with anyio.fail_after(TIMEOUT):
            upstream_tools = await _all_tools(direct)
            gateway_tools = await _all_tools(fed)
            first_page = await fed.session.list_tools(params=None)
        assert len(first_page.tools) == 7  # the agent's page_size, not the upstream's
        assert first_page.next_cursor
        assert sorted(t.name for t in gateway_tools) == sorted(t.name for t in upstream_tools)
        by_name = {t.name: t for t in upstream_tools}
        for tool in gateway_tools:
            assert tool.input_schema == by_name[tool.name].input_schema
        direct_resources = await direct.list_resources()
        fed_resources = await fed.list_resources()
        federated = sorted(str(r.uri) for r in fed_resources.resources if not str(r.uri).startswith("hivegate://"))
        assert federated == sorted(str(r.uri) for r in direct_resources.resources)  # and the gateway's own
        direct_prompts = await direct.list_prompts()
        fed_prompts = await fed.list_prompts()
        assert sorted(p.name for p in fed_prompts.prompts) == sorted(p.name for p in direct_prompts.prompts)


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_results_pass_through_unchanged(world: World, mode: str) -> None:
    async with (
        client_of(world.upstream, mode) as direct,
        client_of(f"{world.gateway.url}/fed/mcp", mode, world.alice) as fed,
    ):
        with anyio.fail_after(TIMEOUT):
            await direct.list_tools()
            await fed.list_tools()
            for tool in (
                "test_simple_text",
                "test_image_content",
                "test_multiple_content_types",
                "test_error_handling",
            ):
                want = await direct.call_tool(tool, {})
                got = await fed.call_tool(tool, {})
                assert got.is_error == want.is_error, tool
                assert [c.model_dump() for c in got.content] == [c.model_dump() for c in want.content], tool
            want_read = await direct.read_resource("test://static-text")
            got_read = await fed.read_resource("test://static-text")
            assert got_read.contents == want_read.contents


async def test_progress_reaches_the_caller_on_its_own_token(world: World) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with client_of(f"{world.gateway.url}/fed/mcp", "legacy", world.alice) as fed:
        with anyio.fail_after(TIMEOUT):
            await fed.list_tools()
            result = await fed.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
    assert result.is_error is False
    assert seen, "no progress reached the caller"


async def test_an_unreachable_upstream_is_agent_service_unavailable(world: World) -> None:
    async with client_of(f"{world.gateway.url}/fed-gone/mcp", MODERN, world.alice) as gone:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as raised:
            await gone.list_tools()
    assert raised.value.error.data == {"code": "agent_service_unavailable"}
    assert "127.0.0.1" not in raised.value.error.message
